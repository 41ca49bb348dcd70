// Page 5: a `candor matrix run --json` report: every row with its four assertions and the oracle's
// verdict, filters for unsafe / imprecise / failed rows, each row linking to its timeline.
import type { MatrixReport, RowResult } from '../../matrix/runner.js';
import { html, type Html, qs, seg } from '../html.js';

export type MatrixLoad =
  | { ok: true; value: { path: string; report: MatrixReport }; failure?: never }
  | { ok: false; failure: string; value?: never };

/** Checks the shape the page reads; a file that is not a matrix report is named with the field. */
export function parseMatrixReport(text: string, path: string): MatrixLoad {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, failure: `${path}: not valid JSON` };
  }
  const r = json as Partial<MatrixReport> | null;
  if (typeof r !== 'object' || r === null)
    return { ok: false, failure: `${path}: not a JSON object` };
  if (typeof r.matrix !== 'string')
    return { ok: false, failure: `${path}: field "matrix" is missing` };
  if (!Array.isArray(r.rows)) return { ok: false, failure: `${path}: field "rows" is not a list` };
  const bad = r.rows.findIndex(
    (row: Partial<RowResult> | null) =>
      typeof row !== 'object' ||
      row === null ||
      typeof row.id !== 'string' ||
      typeof row.oracle !== 'object' ||
      typeof row.assertions !== 'object',
  );
  if (bad >= 0)
    return { ok: false, failure: `${path}: rows[${bad}] lacks id, oracle or assertions` };
  if (typeof r.summary !== 'object' || r.summary === null)
    return { ok: false, failure: `${path}: field "summary" is missing` };
  return { ok: true, value: { path, report: r as MatrixReport } };
}

export const MATRIX_FILTERS = ['all', 'unsafe', 'imprecise', 'failed'] as const;
export type MatrixFilter = (typeof MATRIX_FILTERS)[number];

const keep = (r: RowResult, f: MatrixFilter): boolean =>
  f === 'all' ||
  (f === 'unsafe' && r.oracle.verdict === 'unsafe') ||
  (f === 'imprecise' && r.oracle.verdict === 'imprecise') ||
  (f === 'failed' && !r.passed && r.skipped === undefined);

const mark = (r: RowResult, ok: boolean): Html =>
  r.skipped !== undefined
    ? html`<span class="muted">skip</span>`
    : ok
      ? html`<span class="ok-text">ok</span>`
      : html`<span class="flag">FAIL</span>`;

export function matrixBody(
  loaded: MatrixLoad | null,
  filter: MatrixFilter,
  known: (operationId: string) => boolean,
  cli = 'candor',
): Html {
  if (loaded === null) {
    // The demo's own run (its ledger and candor.yaml in .candor/), then the view with its report.
    return html`<h1>Matrix report</h1>
      <p>No report loaded. Start the view with one, e.g. the demo's:</p>
      <pre class="cmd">
${cli} demo --json report.json
${cli} ui --config .candor/demo.yaml --matrix report.json</pre>`;
  }
  if (!loaded.ok)
    return html`<h1>Matrix report</h1>
      <p class="flag">${loaded.failure}</p>`;
  const { report, path } = loaded.value;
  const s = report.summary;
  const rows = report.rows.filter((r) => keep(r, filter));
  return html`<h1>Matrix report <span class="mono">${report.matrix}</span></h1>
<p class="summary-line">${path} · ${s.rows} rows, ${s.passed} passed, <span${s.failed ? html` class="flag"` : ''}>${s.failed} failed</span>, ${s.imprecise} imprecise, <span${s.unsafe ? html` class="flag"` : ''}>${s.unsafe} unsafe claims</span>, ${s.secret_leaks} secret leaks${s.skipped ? `, ${s.skipped} skipped` : ''}</p>
<nav class="pager" aria-label="Row filter">${MATRIX_FILTERS.map((f) =>
    f === filter
      ? html`<span class="button" aria-current="true">${f}</span>`
      : html`<a class="button secondary" href="/matrix${qs({ show: f === 'all' ? undefined : f })}"
          >${f}</a
        >`,
  )}<span>${rows.length} row(s)</span></nav>
<table aria-label="Matrix rows"><thead><tr><th scope="col">Row</th><th scope="col">Condition</th><th scope="col">Category / retry</th><th scope="col">Effect known</th><th scope="col">1 claim</th><th scope="col">2 agent</th><th scope="col">3 remote</th><th scope="col">4 trail</th><th scope="col">Oracle</th><th scope="col">Timeline</th></tr></thead><tbody>${rows.map(
    (r) =>
      html`<tr
        data-row="${r.id}"
        ${!r.passed && r.skipped === undefined ? html` class="prio-0"` : ''}
      >
        <td class="mono">${r.id}</td>
        <td>${r.condition}</td>
        <td>
          ${r.envelope ? `${r.envelope.category} / ${r.envelope.retry}` : (r.error ?? '–')}${r.final && r.final !== r.envelope ? ` → ${r.final.category}` : ''}
        </td>
        <td>${r.remote_effect_known ? 'yes' : 'no'}</td>
        <td>${mark(r, r.assertions.category_and_retry.ok)}</td>
        <td>${mark(r, r.assertions.agent_next_action.ok)}</td>
        <td>${mark(r, r.assertions.remote_state.ok)}</td>
        <td>${mark(r, r.assertions.event_trail.ok)}</td>
        <td>
          ${r.oracle.verdict === 'unsafe' ? html`<span class="flag" title="${r.oracle.detail}">UNSAFE</span>` : r.oracle.verdict}
        </td>
        <td>
          ${r.operation_id ? (known(r.operation_id) ? html`<a href="/op/${seg(r.operation_id)}">timeline</a>` : html`<span class="muted" title="${r.operation_id}">not in this ledger</span>`) : '–'}
        </td>
      </tr>`,
  )}</tbody></table>`;
}
