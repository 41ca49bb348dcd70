// Page 1: every operation, unresolved and duplicate effects first, with filters, search, counts per
// state and server-side pagination. Plain GET forms: the page works without the script.
import { OperationState, valuesOf, type OperationState as State } from '../../core/vocabulary.js';
import { dash, html, iso, qs, type Html } from '../html.js';
import { stateBadge } from '../layout.js';
import { priority, type OpFilter, type OperationIndex } from '../op-index.js';

export const PAGE_SIZE = 50;

export interface OpsQuery {
  filter: OpFilter;
  page: number;
  /** The raw parameters, to keep them in links. */
  params: Record<string, string | undefined>;
}

const STATES = valuesOf(OperationState);

/** `datetime-local` values are read as UTC (the page shows UTC times). */
function parseTime(v: string | undefined): number | undefined {
  if (!v) return undefined;
  const ms = Date.parse(/Z$|[+-]\d\d:\d\d$/.test(v) ? v : `${v}Z`);
  return Number.isNaN(ms) ? undefined : ms;
}

export function parseOpsQuery(url: URL): OpsQuery {
  const get = (k: string): string | undefined => url.searchParams.get(k)?.trim() || undefined;
  const states = url.searchParams
    .getAll('state')
    .flatMap((s) => s.split(','))
    .filter((s): s is State => (STATES as readonly string[]).includes(s));
  const from = parseTime(get('from'));
  const to = parseTime(get('to'));
  const filter: OpFilter = {
    ...(states.length > 0 ? { states } : {}),
    ...(get('action') ? { action: get('action')! } : {}),
    ...(get('class') ? { cls: get('class')! } : {}),
    ...(get('session') ? { session: get('session')! } : {}),
    ...(from !== undefined ? { from } : {}),
    ...(to !== undefined ? { to } : {}),
    ...(get('q') ? { q: get('q')! } : {}),
  };
  const page = Math.max(1, Math.min(1_000_000, Number.parseInt(get('page') ?? '1', 10) || 1));
  return {
    filter,
    page,
    params: {
      state: states.length > 0 ? states.join(',') : undefined,
      action: get('action'),
      class: get('class'),
      session: get('session'),
      from: get('from'),
      to: get('to'),
      q: get('q'),
    },
  };
}

const select = (
  name: string,
  label: string,
  options: string[],
  current: string | undefined,
): Html =>
  html`<label
    >${label}<select name="${name}">
      <option value="">any</option>
      ${options.map((o) => html`<option${o === current ? html` selected` : ''}>${o}</option>`)}
    </select></label
  >`;

export function operationsBody(index: OperationIndex, q: OpsQuery): Html {
  const { actions, classes } = index.facets();
  const result = index.page(q.filter, (q.page - 1) * PAGE_SIZE, PAGE_SIZE);
  const chosen = new Set(q.filter.states ?? []);
  const pages = Math.max(1, Math.ceil(result.total / PAGE_SIZE));
  const link = (page: number): string => `/${qs({ ...q.params, page })}`;
  const sessions = index.sessions().map((s) => s.id);
  return html`<h1>Operations</h1>
    <form class="filters card" method="get" action="/" role="search" aria-label="Filter operations">
      <label
        >Search<input
          type="search"
          name="q"
          value="${q.params.q ?? ''}"
          placeholder="operation id, correlation id or remote ref"
      /></label>
      <fieldset class="states">
        <legend>State</legend>
        ${STATES.map(
          (s) =>
            html`<label
              ><input
                type="checkbox"
                name="state"
                value="${s}"
                ${chosen.has(s) ? html` checked` : ''}
              />${s}</label
            >`,
        )}
      </fieldset>
      ${select('action', 'Action', actions, q.params.action)}
      ${select('class', 'Action class', classes, q.params.class)}
      ${select('session', 'Session', sessions, q.params.session)}
      <label
        >Opened from (UTC)<input
          type="datetime-local"
          step="1"
          name="from"
          value="${q.params.from ?? ''}"
      /></label>
      <label
        >Opened to (UTC)<input
          type="datetime-local"
          step="1"
          name="to"
          value="${q.params.to ?? ''}"
      /></label>
      <button type="submit">Apply</button> <a class="button secondary" href="/">Clear</a>
    </form>
    <div id="live-region" data-watch="*">
      <p class="summary-line" id="state-counts" aria-label="Operations per state">
        ${STATES.map(
          (s) =>
            html`<a href="/${qs({ ...q.params, state: s, page: undefined })}"
                >${stateBadge(s)} <span data-state-count="${s}">${result.counts[s]}</span></a
              >
              &nbsp; `,
        )}
      </p>
      <p class="summary-line">
        <strong data-total>${result.total}</strong> matching operation(s) · duplicate effects first,
        then unresolved, newest first
      </p>
      <table aria-label="Operations">
        <thead>
          <tr>
            <th scope="col">Operation</th>
            <th scope="col">State</th>
            <th scope="col">Action</th>
            <th scope="col">Class</th>
            <th scope="col">Attempts</th>
            <th scope="col">Remote refs</th>
            <th scope="col">Correlation</th>
            <th scope="col">Opened (UTC)</th>
          </tr>
        </thead>
        <tbody>
          ${
            result.rows.length === 0
              ? html`<tr>
                  <td colspan="8" class="muted">No operation matches.</td>
                </tr>`
              : result.rows.map((o) => {
                  const p = priority(o);
                  return html`<tr class="prio-${p}" data-op="${o.id}">
                    <td>
                      <a class="mono" href="/op/${o.id}">${o.id}</a
                      >${p === 0 ? html` <span class="badge s-dup">DUPLICATE</span>` : ''}
                    </td>
                    <td>${stateBadge(o.state)}</td>
                    <td>${dash(o.action)}</td>
                    <td>${dash(o.cls)}</td>
                    <td>
                      ${o.attempts}${o.delivered > 1 ? html` <span class="flag" title="reached the destination ${o.delivered} times">sent ${o.delivered}×</span>` : ''}
                    </td>
                    <td class="mono">${o.refs.length ? o.refs.join(', ') : '–'}</td>
                    <td class="mono">${dash(o.correlation)}</td>
                    <td>${iso(o.opened_at)}</td>
                  </tr>`;
                })
          }
        </tbody>
      </table>
      <nav class="pager" aria-label="Pages">
        ${
          q.page > 1
            ? html`<a class="button secondary" href="${link(q.page - 1)}" rel="prev">← Previous</a>`
            : ''
        }<span>page ${q.page} of ${pages}</span>${
          q.page < pages
            ? html`<a class="button secondary" href="${link(q.page + 1)}" rel="next">Next →</a>`
            : ''
        }
      </nav>
    </div>
    <section class="card" aria-labelledby="live-h">
      <h2 id="live-h">Live: ledger events as they are appended</h2>
      <ol id="live-feed" aria-live="polite"></ol>
      <p class="muted">
        Ledger read up to seq ${index.lastSeq}. New events appear here and in the table without a
        reload.
      </p>
    </section>`;
}
