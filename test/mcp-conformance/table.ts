// The README compatibility table, rendered from the conformance suite's results
// (`CANDOR_WRITE_COMPAT=1 npx vitest run test/mcp-conformance` rewrites results.json).
import { fileURLToPath } from 'node:url';

export const CHECKS = [
  'list',
  'success',
  'failure',
  'invalid_input',
  'parallel',
  'approval',
] as const;
export type Check = (typeof CHECKS)[number];

export interface ResultRow {
  client: string;
  transport: 'stdio' | 'http';
  /** The protocol revision the connection landed on. */
  version: string | null;
  checks: Partial<Record<Check, 'pass' | 'fail'>>;
}

export const RESULTS_FILE = fileURLToPath(new URL('./results.json', import.meta.url));

export const README_BEGIN =
  '<!-- compat:begin (generated from test/mcp-conformance/results.json) -->';
export const README_END = '<!-- compat:end -->';

/** One Markdown table: client × transport, the negotiated revision and each check. */
export function renderTable(rows: readonly ResultRow[]): string {
  const head = `| client | transport | protocol | ${CHECKS.join(' | ')} |`;
  const rule = `|${' --- |'.repeat(3 + CHECKS.length)}`;
  const lines = rows.map((r) => {
    const cells = CHECKS.map((c) => (r.checks[c] === 'pass' ? 'yes' : r.checks[c] ? 'NO' : '—'));
    return `| ${r.client} | ${r.transport} | ${r.version ?? '—'} | ${cells.join(' | ')} |`;
  });
  return [README_BEGIN, head, rule, ...lines, README_END].join('\n');
}
