// Matrix reports: a live progress line per row, a summary table, JSON and JUnit XML.
import type { MatrixReport, RowResult } from './runner.js';

const mark = (ok: boolean): string => (ok ? 'ok' : 'FAIL');

export function progressLine(r: RowResult, index: number, total: number): string {
  const n = String(index + 1).padStart(String(total).length);
  if (r.skipped !== undefined) return `[${n}/${total}] skip  ${r.id.padEnd(44)} ${r.skipped}`;
  const got = r.envelope ? `${r.envelope.category}/${r.envelope.retry}` : (r.error ?? 'error');
  const final = r.final && r.final !== r.envelope ? ` -> ${r.final.category}` : '';
  return `[${n}/${total}] ${r.passed ? 'pass' : 'FAIL'}  ${r.id.padEnd(44)} ${got}${final}${r.oracle.verdict === 'imprecise' ? '  (imprecise)' : r.oracle.verdict === 'unsafe' ? '  (UNSAFE claim)' : ''}`;
}

export function summaryLine(report: MatrixReport): string {
  const s = report.summary;
  const skipped = s.skipped > 0 ? `, ${s.skipped} skipped` : '';
  const notRun = s.not_run > 0 ? `, ${s.not_run} not judged by the oracle (did not run)` : '';
  return `${s.rows} rows, ${s.passed} passed, ${s.failed} failed${skipped}, ${s.imprecise} imprecise, ${s.unsafe} unsafe claims, ${s.secret_leaks} secret leaks${notRun}`;
}

export function tableText(report: MatrixReport): string {
  const header = [
    'row',
    'condition',
    'category',
    'retry',
    'effect',
    'known',
    '1 claim',
    '2 agent',
    '3 remote',
    '4 trail',
    'oracle',
  ];
  const rows = report.rows.map((r) => {
    const m = (ok: boolean): string => (r.skipped !== undefined ? 'skip' : mark(ok));
    return [
      r.id,
      r.condition,
      r.envelope?.category ?? '-',
      r.envelope?.retry ?? '-',
      r.envelope?.remote_effect ?? '-',
      r.remote_effect_known ? 'yes' : 'no',
      m(r.assertions.category_and_retry.ok),
      m(r.assertions.agent_next_action.ok),
      m(r.assertions.remote_state.ok),
      m(r.assertions.event_trail.ok),
      r.oracle.verdict,
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return (
    [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n') + '\n'
  );
}

/** The failing assertions of a row and its merged client/fake timeline. */
export function failureText(r: RowResult): string {
  const out = [`row ${r.id} (${r.operation}, ${r.condition}) failed:`];
  if (r.error) out.push(`  error: ${r.error}`);
  for (const [name, a] of Object.entries(r.assertions)) {
    if (a.ok) continue;
    out.push(
      `  ${name}: expected ${JSON.stringify(a.expected)}, got ${JSON.stringify(a.actual)}${a.detail ? ` (${a.detail})` : ''}`,
    );
  }
  if (r.oracle.verdict === 'unsafe') out.push(`  oracle: UNSAFE: ${r.oracle.detail}`);
  if (r.oracle.verdict === 'not_run') out.push(`  oracle: not_run: ${r.oracle.detail}`);
  if (r.secret_in_result)
    out.push('  secret_in_result: a secret reached the result, transcript or ledger');
  if (r.timeline.length) {
    out.push('  timeline:');
    const t0 = r.timeline[0]!.at;
    for (const t of r.timeline)
      out.push(
        `    +${String(Math.round(t.at - t0)).padStart(5)} ms  ${t.source.padEnd(6)} ${t.event}${t.detail ? `  ${t.detail}` : ''}`,
      );
  }
  return out.join('\n') + '\n';
}

export function toJson(report: MatrixReport): string {
  return JSON.stringify(report, null, 2) + '\n';
}

const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

export function toJunit(report: MatrixReport): string {
  const cases = report.rows.map((r) => {
    const body = r.passed
      ? ''
      : r.skipped !== undefined
        ? `<skipped message="${esc(r.skipped)}"/>`
        : `<failure message="${esc(failureText(r).split('\n')[1]?.trim() ?? 'failed')}">${esc(failureText(r))}</failure>`;
    const oracle = `<properties><property name="oracle" value="${esc(r.oracle.verdict)}"/></properties>`;
    return `    <testcase classname="candor.matrix.${esc(report.matrix)}" name="${esc(r.id)}">${oracle}${body}</testcase>`;
  });
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites tests="${report.summary.rows}" failures="${report.summary.failed}" skipped="${report.summary.skipped}">`,
    `  <testsuite name="${esc(report.matrix)}" tests="${report.summary.rows}" failures="${report.summary.failed}" skipped="${report.summary.skipped}">`,
    ...cases,
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n');
}
