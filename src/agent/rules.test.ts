import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Envelope } from '../core/envelope.js';
import { checkTranscript, rulesSchema } from './rules.js';
import { parseTranscript, type TranscriptStep } from './transcript.js';

function env(
  category: Envelope['category'],
  retry: Envelope['retry'],
  extra: Partial<Envelope> = {},
): Envelope {
  return {
    ok: category === 'succeeded',
    category,
    operation: 'create_record',
    operation_id: 'op_A',
    retry,
    remote_effect: category === 'outcome_unknown' ? 'unknown' : 'none',
    correlation_id: 'cor_A',
    message: '',
    data: null,
    diagnostics_ref: null,
    ...extra,
  };
}
const step = (
  seq: number,
  tool: string,
  args: Record<string, unknown>,
  result: Envelope | null,
  at = seq * 100,
): TranscriptStep => ({ seq, at, tool, args, result });

function load(name: string): TranscriptStep[] {
  const parsed = parseTranscript(
    readFileSync(new URL(`../../examples/transcripts/${name}`, import.meta.url), 'utf8'),
  );
  if (!parsed.ok) throw new Error(parsed.failure.problem);
  return parsed.value;
}

describe('transcript checker', () => {
  it('allows create -> outcome_unknown -> lookup -> found -> read -> attach_note', () => {
    expect(checkTranscript(load('good.jsonl'))).toEqual([]);
  });

  it('forbids create -> outcome_unknown -> create even when the second create succeeds', () => {
    const v = checkTranscript(load('bad.jsonl'));
    expect(v).toHaveLength(1);
    expect(v[0]).toMatchObject({
      rule: 'no_repeat_after_unknown',
      step: 1,
      because_of: 0,
      tool: 'create_record',
    });
  });

  it('allows continuing the same operation when the envelope licensed a retry', () => {
    const steps = [
      step(0, 'create_record', { title: 'x' }, env('outcome_unknown', 'allowed')),
      step(1, 'create_record', { title: 'x', operation_id: 'op_A' }, env('succeeded', 'never')),
    ];
    expect(checkTranscript(steps)).toEqual([]);
  });

  it('forbids a create after the lookup already found the record', () => {
    const steps = [
      step(0, 'create_record', { title: 'x' }, env('outcome_unknown', 'reconcile_first')),
      step(1, 'reconcile_operation', { operation_id: 'op_A' }, env('succeeded', 'never')),
      step(2, 'create_record', { title: 'x', operation_id: 'op_A' }, env('succeeded', 'never')),
    ];
    expect(checkTranscript(steps).map((v) => v.rule)).toEqual(['no_repeat_after_unknown']);
  });

  it('forbids the same operation again after authentication_failed or approval_denied', () => {
    for (const category of ['authentication_failed', 'approval_denied'] as const) {
      const steps = [
        step(0, 'delete_release', { id: 'r1' }, env(category, 'never')),
        step(1, 'delete_release', { id: 'r1' }, env(category, 'never')),
      ];
      expect(checkTranscript(steps)).toEqual([
        expect.objectContaining({ rule: 'no_repeat_after_refusal', step: 1 }),
      ]);
    }
  });

  it('forbids a retry before retry_after_ms, allows it after', () => {
    const limited = env('rate_limited', 'after_delay', { retry_after_ms: 5000 });
    const early = [
      step(0, 'update_record', { id: 1 }, limited, 0),
      step(1, 'update_record', { id: 1, operation_id: 'op_A' }, env('succeeded', 'never'), 4000),
    ];
    expect(checkTranscript(early).map((v) => v.rule)).toEqual(['respect_retry_after']);
    const late = [
      step(0, 'update_record', { id: 1 }, limited, 0),
      step(1, 'update_record', { id: 1 }, env('succeeded', 'never'), 5000),
    ];
    expect(checkTranscript(late)).toEqual([]);
  });

  it('lets a rules file switch a rule off, and rejects unknown keys', () => {
    const rules = rulesSchema.parse({ rules: { no_repeat_after_unknown: false } });
    expect(checkTranscript(load('bad.jsonl'), rules)).toEqual([]);
    expect(rulesSchema.safeParse({ rulez: {} }).success).toBe(false);
  });

  it('reports a bad transcript line by number and field', () => {
    const r = parseTranscript(
      '{"seq":0,"at":1,"tool":"x","args":{},"result":null}\n{"seq":1,"at":"soon","tool":"x"}\n',
    );
    expect(r).toEqual({ ok: false, failure: { line: 2, problem: expect.stringContaining('at') } });
  });
});
