// Until the failure matrix lands, the demo runs the seven reference cases through the real
// classifier and prints what each one may honestly claim.
import { classify } from '../../core/classify.js';
import type { Contract, Evidence } from '../../core/evidence.js';
import type { CommandIo } from '../io.js';

const CASES: Array<{ name: string; evidence: Evidence; contract: Contract }> = [
  {
    name: 'read issue + DNS failure',
    evidence: { phase: 'not_sent', local_error: 'dns' },
    contract: { action_class: 'read' },
  },
  {
    name: 'create issue + expired token',
    evidence: { phase: 'response_complete', status: 401, www_authenticate: true },
    contract: { action_class: 'create' },
  },
  {
    name: 'delete release + denied',
    evidence: { phase: 'response_complete', status: 403 },
    contract: { action_class: 'destructive' },
  },
  {
    name: 'read build + status:7 for a string',
    evidence: { phase: 'response_complete', status: 200, contract_check: 'violated' },
    contract: { action_class: 'read' },
  },
  {
    name: 'create deployment + reply after deadline',
    evidence: { phase: 'request_sent', local_error: 'deadline' },
    contract: { action_class: 'create', reconciliation: true },
  },
  {
    name: 'SSH restart + helper killed after start',
    evidence: { phase: 'request_sent', local_error: 'cancelled' },
    contract: { action_class: 'set_state', reconciliation: true },
  },
  {
    name: 'update record + 429 Retry-After: 30',
    evidence: { phase: 'response_complete', status: 429, retry_after_ms: 30_000 },
    contract: { action_class: 'set_state' },
  },
];

export function run(_args: string[], io: CommandIo): Promise<number> {
  const rows = CASES.map((c) => {
    const r = classify(c.evidence, c.contract);
    return [
      c.name,
      r.category,
      r.retry + (r.retry_after_ms !== null ? ` (${r.retry_after_ms} ms)` : ''),
      r.remote_effect,
    ];
  });
  const header = ['case', 'category', 'retry', 'remote_effect'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ');
  io.out(`${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n`);
  for (const r of rows) io.out(`${line(r)}\n`);
  io.out(
    `\n${rows.length} cases classified (classifier only; the fault-injection matrix is not wired in yet)\n`,
  );
  return Promise.resolve(0);
}
