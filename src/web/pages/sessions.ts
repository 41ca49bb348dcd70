// Page 3: one agent run as a sequence of calls, with the transitions the transcript checker
// (src/agent/rules.ts) would flag. The calls are rebuilt from the ledger: each operation is the
// call that opened it (its result is what the last attempt returned), each observation a lookup
// of that operation. A transcript recorded from the agent says more; this is what the ledger
// alone supports.
import { checkTranscript, DEFAULT_RULES, type Violation } from '../../agent/rules.js';
import type { TranscriptStep } from '../../agent/transcript.js';
import type { Envelope } from '../../core/envelope.js';
import { outcomeOf } from '../../core/rule-table.js';
import type { OperationView } from '../../ledger/projection.js';
import { dash, html, type Html, iso, seg } from '../html.js';
import { stateBadge } from '../layout.js';
import type { SessionSummary } from '../../ledger/listing.js';

/** At most this many calls are shown for one session (the rest: use the operations filter). */
export const SESSION_CALL_LIMIT = 2_000;

const LOOKUP_TOOL = DEFAULT_RULES.lookup_tools[0] ?? 'reconcile_operation';

interface Call {
  step: TranscriptStep;
  view: OperationView;
  kind: 'call' | 'lookup';
}

export function callsOf(views: readonly OperationView[]): Call[] {
  const calls: (Omit<Call, 'step'> & Omit<TranscriptStep, 'seq'> & { result: Envelope | null })[] =
    [];
  for (const v of views) {
    const last = v.attempts.at(-1)?.finish ?? null;
    const base = {
      operation: v.action ?? 'unknown',
      operation_id: v.operation_id,
      correlation_id: v.correlation_id,
      message: '',
      data: null,
      diagnostics_ref: null,
    };
    calls.push({
      view: v,
      kind: 'call',
      at: v.opened_at ?? v.attempts[0]?.started_at ?? 0,
      tool: v.action ?? 'unknown',
      args: {
        subject_ref: v.intent?.subject_ref ?? null,
        params_digest: v.intent?.params_digest ?? null,
      },
      result: last
        ? {
            ...base,
            ok: last.category === 'succeeded',
            category: last.category,
            retry: last.retry,
            remote_effect: last.remote_effect,
            ...(last.retry === 'after_delay' ? { retry_after_ms: 0 } : {}),
          }
        : null,
    });
    for (const o of v.observations) {
      const settled = o.state_after === 'succeeded';
      const dup = o.state_after === 'duplicate_effect_confirmed';
      // What the lookup found, in the rule table's words for a lookup's finding.
      const found = outcomeOf(
        settled ? 'reconciled_found' : dup ? 'reconciled_duplicates' : 'unknown_lookup_next',
      );
      calls.push({
        view: v,
        kind: 'lookup',
        at: o.at,
        tool: LOOKUP_TOOL,
        args: { operation_id: v.operation_id },
        result: {
          ...base,
          ok: settled,
          category: found.category,
          retry: found.retry,
          remote_effect: settled || dup ? 'applied' : 'unknown',
        },
      });
    }
  }
  calls.sort((a, b) => a.at - b.at);
  return calls.map((c, seq) => ({
    view: c.view,
    kind: c.kind,
    step: { seq, at: c.at, tool: c.tool, args: c.args, result: c.result },
  }));
}

export function sessionsListBody(sessions: readonly SessionSummary[], limit: number): Html {
  return html`<h1>Sessions</h1>
    <p class="muted">
      A session is one run of an agent process. Open one to see its calls in order and the
      transitions the transcript checker would
      flag.${sessions.length >= limit ? ` The newest ${limit} are listed.` : ''}
    </p>
    <table aria-label="Sessions">
      <thead>
        <tr>
          <th scope="col">Session</th>
          <th scope="col">Agent</th>
          <th scope="col">Operations</th>
          <th scope="col">Started (UTC)</th>
        </tr>
      </thead>
      <tbody>
        ${
          sessions.length === 0
            ? html`<tr>
                <td colspan="4" class="muted">No session in this ledger.</td>
              </tr>`
            : sessions.map(
                (s) =>
                  html`<tr>
                    <td>
                      <a class="mono" href="/sessions/${seg(s.session_id)}">${s.session_id}</a>
                    </td>
                    <td>${dash(s.agent)}</td>
                    <td>${s.operations}</td>
                    <td>${iso(s.first_at)}</td>
                  </tr>`,
              )
        }
      </tbody>
    </table>`;
}

export function sessionBody(id: string, views: readonly OperationView[], truncated: boolean): Html {
  const calls = callsOf(views);
  const violations = checkTranscript(
    calls.map((c) => c.step),
    DEFAULT_RULES,
  );
  const bySeq = new Map<number, Violation[]>();
  for (const v of violations) bySeq.set(v.step, [...(bySeq.get(v.step) ?? []), v]);
  return html`<div id="live-region" data-watch="${id}">
    <p><a href="/sessions">← Sessions</a></p>
    <h1>Session <span class="mono">${id}</span></h1>
    <p class="summary-line">
      ${calls.length} call(s) from ${views.length} operation(s) ·
      ${violations.length === 0 ? html`<span class="ok-text">no transition the transcript checker would flag</span>` : html`<span class="flag" data-violations="${violations.length}">${violations.length} transition(s) the transcript checker would flag</span>`}
      ${truncated ? html` · showing the first ${SESSION_CALL_LIMIT} operations` : ''}
    </p>
    <ol class="calls" aria-label="Calls in order">
      ${calls.map((c) => {
        const vs = bySeq.get(c.step.seq) ?? [];
        const r = c.step.result;
        return html`<li${vs.length ? html` class="violation"` : ''} data-step="${c.step.seq}">
<strong>${c.step.seq + 1}. ${c.kind === 'lookup' ? `lookup (${c.step.tool})` : c.step.tool}</strong>
<span class="muted">${iso(c.step.at)}</span> · <a class="mono" href="/op/${seg(c.view.operation_id)}">${c.view.operation_id}</a> ${stateBadge(c.view.state)}
<div>${r ? `→ ${r.category}, retry ${r.retry}, remote effect ${r.remote_effect}` : '→ no result recorded'}</div>
${vs.map((v) => html`<div class="why" role="note">⚠ ${v.rule}: ${v.explanation} (because of call ${v.because_of + 1})</div>`)}
</li>`;
      })}
    </ol>
  </div>`;
}
