// Page 1: every operation, unresolved and duplicate effects first, with filters, search, counts per
// state and server-side keyset pagination (the store's operations listing: a page costs the same
// on the first page and the ten-thousandth). Plain GET forms: the page works without the script.
import { OperationState, valuesOf, type OperationState as State } from '../../core/vocabulary.js';
import type {
  ListingFacets,
  ListingTrail,
  OperationsPage,
  OperationsQuery,
} from '../../ledger/listing.js';
import { dash, html, type Html, iso, qs, seg } from '../html.js';
import { stateBadge } from '../layout.js';

export const PAGE_SIZE = 50;

export interface OpsQuery {
  query: OperationsQuery;
  /** The raw filter parameters, to keep them in links (cursors are added per link). */
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
  const query: OperationsQuery = {
    limit: PAGE_SIZE,
    ...(states.length > 0 ? { states } : {}),
    ...(get('action') ? { action: get('action')! } : {}),
    ...(get('class') ? { action_class: get('class')! } : {}),
    ...(get('session') ? { session_id: get('session')! } : {}),
    ...(from !== undefined ? { opened_from: from } : {}),
    ...(to !== undefined ? { opened_to: to } : {}),
    ...(get('q') ? { search: get('q')! } : {}),
    ...(get('after') ? { after: get('after')! } : get('before') ? { before: get('before')! } : {}),
  };
  return {
    query,
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

/**
 * The listing is projected after the commit (SQLite): a page that missed some events says so,
 * because its counts and rows may be that far behind (an operation's own page is always exact).
 */
export const trailLine = (t: ListingTrail): Html =>
  html`<p class="summary-line flag" data-trails="${String(t.events)}" role="status">
    The listing trails the ledger by ${String(t.events)} event(s) (${String(Math.round(t.ms))} ms);
    reload to catch up.
  </p>`;

export function operationsBody(
  result: OperationsPage,
  facets: ListingFacets,
  q: OpsQuery,
  lastSeq: number,
): Html {
  const actions = facets.actions;
  const classes = facets.action_classes;
  const chosen = new Set(q.query.states ?? []);
  const link = (cursor: { after: string } | { before: string }): string =>
    `/${qs({ ...q.params, ...cursor })}`;
  const sessions = facets.sessions.map((s) => s.session_id);
  if (q.params.session !== undefined && !sessions.includes(q.params.session))
    sessions.unshift(q.params.session);
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
      ${result.trails ? trailLine(result.trails) : ''}
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
                  const p = o.priority;
                  return html`<tr class="prio-${p}" data-op="${o.operation_id}">
                    <td>
                      <a class="mono" href="/op/${seg(o.operation_id)}">${o.operation_id}</a
                      >${p === 0 ? html` <span class="badge s-dup">DUPLICATE</span>` : ''}
                    </td>
                    <td>${stateBadge(o.state)}</td>
                    <td>${dash(o.action)}</td>
                    <td>${dash(o.action_class)}</td>
                    <td>
                      ${o.attempts}${o.delivered > 1 ? html` <span class="flag" title="reached the destination ${o.delivered} times">sent ${o.delivered}×</span>` : ''}
                    </td>
                    <td class="mono">${o.remote_refs.length ? o.remote_refs.join(', ') : '–'}</td>
                    <td class="mono">${dash(o.correlation_id)}</td>
                    <td>${iso(o.opened_at)}</td>
                  </tr>`;
                })
          }
        </tbody>
      </table>
      <nav class="pager" aria-label="Pages">
        ${
          result.prev !== null
            ? html`<a class="button secondary" href="/${qs(q.params)}">⇤ First</a
                ><a class="button secondary" href="${link({ before: result.prev })}" rel="prev"
                  >← Previous</a
                >`
            : ''
        }<span>${result.rows.length} of ${result.total} shown</span>${
          result.next !== null
            ? html`<a class="button secondary" href="${link({ after: result.next })}" rel="next"
                >Next →</a
              >`
            : ''
        }
      </nav>
    </div>
    <section class="card" aria-labelledby="live-h">
      <h2 id="live-h">Live: ledger events as they are appended</h2>
      <ol id="live-feed" aria-live="polite"></ol>
      <p class="muted">
        Ledger read up to seq ${lastSeq}. New events appear here and in the table without a reload.
      </p>
    </section>`;
}
