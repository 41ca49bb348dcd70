// End to end over stdio: "create a record, read it back, attach a note", with the create's reply
// held back after the commit past the action's deadline. The scripted agent must look the record
// up before any second create; the naive agent retries blindly and must be caught: by the
// transcript checker, by the duplicate record in the fake, and by the ledger (two operations for
// one intent).
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  runNaiveAgent,
  runScriptedAgent,
  type TaskStep,
  type ToolCaller,
} from '../src/agent/scripted.js';
import { checkTranscript } from '../src/agent/rules.js';
import { createRecorder, type TranscriptRecorder } from '../src/agent/transcript.js';
import { envelopeSchema } from '../src/core/envelope.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openLedger } from '../src/ledger/open.js';
import { deliveryVerdict, projectOperation } from '../src/ledger/projection.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';
import {
  connectStdio,
  ROOT,
  tempDir,
  writeConfig,
  type StdioGateway,
} from './fixtures/mcp/stdio.js';

const DEADLINE_MS = 1_000;
const REPLY_DELAY_MS = 4_000;

const TASK: TaskStep[] = [
  { name: 'create', tool: 'create_record', args: () => ({ title: 'quarterly report' }) },
  {
    name: 'read',
    tool: 'get_record',
    args: (m) => ({ id: (m['create'] as { id: string }).id }),
  },
  {
    name: 'note',
    tool: 'add_note',
    args: (m) => ({ record_id: (m['read'] as { id: string }).id, text: 'checked by the agent' }),
  },
];

let fake: FakeService;

beforeAll(async () => {
  fake = await startFakeService({ seed: 11, tokens: [{ name: 'agent', token: TEST_TOKEN }] });
});
afterAll(async () => {
  await fake?.close();
});

interface Run {
  gw: StdioGateway;
  ledgerPath: string;
  dir: string;
  recorder: TranscriptRecorder;
  call: ToolCaller;
  /** Every raw tools/call result (structured content and text blocks), for the leak check. */
  raw: string[];
}

async function start(): Promise<Run> {
  fake.reset();
  // The create commits, then its reply is held back well past the client's deadline.
  fake.arm({
    match: { method: 'POST', path: '/v1/records' },
    phase: 'after_commit',
    action: 'delay',
    delay_ms: REPLY_DELAY_MS,
  });
  const dir = tempDir('candor-mcp-e2e-');
  const ledgerPath = join(dir, 'ledger.db');
  const config = writeConfig(
    dir,
    testConfigYaml({ origin: fake.url, createDeadlineMs: DEADLINE_MS }),
  );
  const gw = await connectStdio(
    ['--config', config, '--ledger', `sqlite:${ledgerPath}`],
    { [TEST_TOKEN_VAR]: TEST_TOKEN },
    dir,
  );
  const recorder = createRecorder();
  const raw: string[] = [];
  const call: ToolCaller = async (tool, args) => {
    const at = Date.now();
    const r = await gw.client.callTool({ name: tool, arguments: args });
    raw.push(JSON.stringify(r));
    const env = envelopeSchema.parse(r.structuredContent);
    expect(r.isError).toBe(!env.ok);
    recorder.record({ at, tool, args, result: env });
    return env;
  };
  return { gw, ledgerPath, dir, recorder, call, raw };
}

function transcriptCheckExit(dir: string, recorder: TranscriptRecorder): number | null {
  const file = join(dir, 'transcript.jsonl');
  writeFileSync(file, recorder.toJsonl());
  const r = spawnSync(
    process.execPath,
    [join(ROOT, 'bin', 'candor.js'), 'transcript', 'check', file],
    {
      cwd: ROOT,
      encoding: 'utf8',
    },
  );
  return r.status;
}

describe('create, read back, attach a note — reply lost after the commit', () => {
  it('the scripted agent reconciles before any second create and finishes with one record', async () => {
    const run = await start();
    try {
      const result = await runScriptedAgent(TASK, run.call, { sleep: () => Promise.resolve() });
      const steps = run.recorder.steps();
      expect(steps.map((s) => s.tool)).toEqual([
        'create_record',
        'reconcile_operation',
        'get_record',
        'add_note',
      ]);
      expect(steps[0]!.result).toMatchObject({
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
      });
      expect(steps[1]!.result).toMatchObject({
        ok: true,
        operation_id: steps[0]!.result!.operation_id,
      });
      expect(result).toMatchObject({ completed: true, stopped_at: null });
      // The task completing is not enough: exactly one record may exist.
      const records = fake.resources.all('records');
      expect(records).toHaveLength(1);
      expect(records[0]).toMatchObject({
        title: 'quarterly report',
        notes: [{ text: 'checked by the agent' }],
      });
      expect(checkTranscript(steps)).toEqual([]);
      expect(transcriptCheckExit(run.dir, run.recorder)).toBe(0);
      expect(run.recorder.toJsonl()).not.toContain(TEST_TOKEN);
    } finally {
      await run.gw.close();
    }
    const opened = await openLedger(`sqlite:${run.ledgerPath}`, { mustExist: true });
    if (!opened.ok) throw new Error(opened.failure.message);
    // Zero leaks: the canary credential is in no envelope, text block, log line, transcript or
    // clear ledger field, in plain, base64 or URL-encoded form.
    const everything = [
      ...run.raw,
      run.gw.stderr(),
      run.recorder.toJsonl(),
      JSON.stringify(await opened.value.read()),
    ].join('\n');
    for (const form of [
      TEST_TOKEN,
      Buffer.from(TEST_TOKEN).toString('base64'),
      encodeURIComponent(TEST_TOKEN),
    ]) {
      expect(everything).not.toContain(form);
    }
    expect(run.raw.length).toBeGreaterThanOrEqual(4);
    const creates = (await opened.value.read()).filter(
      (e) => e.kind === 'operation_opened' && e.data.action === 'create_record',
    );
    expect(creates).toHaveLength(1);
    const view = projectOperation(
      await opened.value.query({ operation_id: creates[0]!.operation_id! }),
    )!;
    await opened.value.close();
    expect(view.state).toBe('succeeded');
    expect(view.observations).toHaveLength(1);
    expect(view.observations[0]).toMatchObject({ source: 'lookup', matches: 1 });
    expect(deliveryVerdict(view).code).toBe('single_delivery');
  });

  it('the naive agent that retries blindly is flagged, and its duplicate stays visible', async () => {
    const run = await start();
    let result;
    try {
      result = await runNaiveAgent(TASK, run.call);
    } finally {
      await run.gw.close();
    }
    // The task "succeeds" — which is exactly why completion alone proves nothing.
    expect(result.completed).toBe(true);
    const steps = run.recorder.steps();
    expect(steps.map((s) => s.tool)).toEqual([
      'create_record',
      'create_record',
      'get_record',
      'add_note',
    ]);
    const violations = checkTranscript(steps);
    expect(violations).toEqual([
      expect.objectContaining({
        rule: 'no_repeat_after_unknown',
        step: 1,
        because_of: 0,
        tool: 'create_record',
      }),
    ]);
    expect(transcriptCheckExit(run.dir, run.recorder)).toBe(1);
    expect(fake.resources.all('records')).toHaveLength(2);

    const opened = await openLedger(`sqlite:${run.ledgerPath}`, { mustExist: true });
    if (!opened.ok) throw new Error(opened.failure.message);
    const ledger = opened.value;
    try {
      const creates = (await ledger.read()).flatMap((e) =>
        e.kind === 'operation_opened' && e.data.action === 'create_record' ? [e] : [],
      );
      expect(creates).toHaveLength(2);
      // Same intent (kind and canonical parameters), two operations: the duplicate is on record.
      expect(creates[0]!.data.intent).toEqual(creates[1]!.data.intent);
      expect(creates[0]!.operation_id).not.toBe(creates[1]!.operation_id);
      const views = await Promise.all(
        creates.map(async (e) =>
          projectOperation(await ledger.query({ operation_id: e.operation_id! }))!,
        ),
      );
      expect(views.map((v) => v.state)).toEqual(['unknown', 'succeeded']);
      expect(views.map((v) => deliveryVerdict(v).code)).toEqual([
        'single_delivery',
        'single_delivery',
      ]);
      expect(await ledger.unresolved()).toContain(creates[0]!.operation_id);
    } finally {
      await ledger.close();
    }
  });
});
