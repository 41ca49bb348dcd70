// Page 2: one operation. The verdict in words on top ("sent twice, two records" must stand out),
// then the timeline and its text equivalent, the intent, every attempt with its retry reason,
// decision and dispatch state, redacted diagnostics (sealed ones stay sealed: this view holds no
// auditor key), observations, approvals, and the `candor` command that would settle it.
import type { StoredEvent } from '../../ledger/events.js';
import { deliveryVerdict, type AttemptView, type OperationView } from '../../ledger/projection.js';
import { isSealedPayload } from '../../ledger/seal.js';
import { createRedactor } from '../../core/redact.js';
import { callerText } from '../../core/caller-text.js';
import { attemptEffectText } from '../../core/fold.js';
import type { RemoteEffect } from '../../core/vocabulary.js';
import { clip, dash, ext, html, iso, seg, type Html } from '../html.js';
import type { Hints } from '../hints.js';
import { stateBadge } from '../layout.js';
import { attemptPhasesSvg, lostPhase, timelineSvg, timelineText } from './timeline.js';

const times = (n: number): string => (n === 1 ? 'once' : n === 2 ? 'twice' : `${n} times`);
const records = (n: number): string =>
  n === 0 ? 'no record' : n === 1 ? 'one record' : n === 2 ? 'two records' : `${n} records`;

export interface Verdict {
  tone: 'bad' | 'warn' | 'ok';
  headline: string;
  detail: string;
}

/** The verdict in words: how often the intent reached the destination and what came of it. */
export function verdictOf(v: OperationView): Verdict {
  const d = deliveryVerdict(v);
  const delivered = v.attempts.filter((a) => a.finish?.dispatch_state !== 'not_sent').length;
  const refs = new Set([
    ...v.attempts.flatMap((a) =>
      a.finish?.response?.remote_ref ? [a.finish.response.remote_ref] : [],
    ),
    ...v.observations.flatMap((o) => o.remote_refs),
    ...(v.resolution?.remote_refs ?? []),
  ]);
  const matches = Math.max(refs.size, ...v.observations.map((o) => o.matches), 0);
  if (d.code === 'duplicate_effect') {
    const listed = [...refs].filter((r) => !d.line.includes(r));
    return {
      tone: 'bad',
      headline: `Sent ${times(Math.max(delivered, 1))}, ${records(Math.max(matches, 2))}: the effect happened more than once`,
      detail: `${d.line}${listed.length ? ` (${listed.map((r) => clip(r)).join(', ')})` : ''}`,
    };
  }
  if (d.code === 'unlicensed_retry') {
    return {
      tone: 'bad',
      headline: `Sent ${times(delivered)} without a licence to retry`,
      detail: d.line,
    };
  }
  const lost = v.attempts
    .map(lostPhase)
    .filter((l): l is string => l !== null)
    .at(-1);
  if (v.state === 'unknown' || v.state === 'open') {
    return {
      tone: 'warn',
      headline: `Outcome unknown — ${lost ?? 'not settled yet'}`,
      detail: `${d.line}. Reconcile (look the result up) before any new attempt.`,
    };
  }
  if (v.state === 'succeeded') {
    return {
      tone: 'ok',
      headline: `Succeeded — sent ${times(delivered)}, ${records(refs.size)}${refs.size ? ` (${[...refs].map((r) => clip(r)).join(', ')})` : ''}`,
      detail: d.line,
    };
  }
  const last = v.attempts.at(-1)?.finish;
  return {
    tone: 'ok',
    headline: `${v.state ?? 'no state'} — ${last ? `${last.category}, remote effect ${attemptEffectText(last, v.remote_effect)}` : 'no attempt'}`,
    detail: d.line,
  };
}

/** The command that would move this operation forward, and why (commands as `hints` types them). */
export function settleCommand(v: OperationView, hints: Hints): { why: string; commands: string[] } {
  const show = `${hints.cli} ops show ${v.operation_id} ${hints.select}`;
  const pending = v.approvals.filter((a) => a.decision === null);
  if (pending.length > 0) {
    return {
      why: 'a person has been asked and has not answered',
      commands: pending.flatMap((a) => [
        `${hints.cli} approve show ${a.approval_id} ${hints.select}`,
        `${hints.cli} approve yes ${a.approval_id} ${hints.select}`,
      ]),
    };
  }
  if (v.state === 'unknown' || v.state === 'open') {
    const why =
      'unresolved: recovery reconciles it from remote evidence, retries only under an honoured key, or marks it for a person';
    return hints.recover !== null
      ? { why, commands: [hints.recover, show] }
      : {
          why: `${why}; recovery needs the candor.yaml that declares this action: ${hints.cli} recover --config <that file> ${hints.select}`,
          commands: [show],
        };
  }
  if (v.state === 'duplicate_effect_confirmed') {
    return {
      why: 'both remote records are kept; a person decides which one stays — a correction is a new operation',
      commands: [show],
    };
  }
  return { why: 'settled: nothing to run', commands: [show] };
}

const redactor = createRedactor();

function diagnosticsOf(events: readonly StoredEvent[], attemptId: string): Html {
  const e = events.find((x) => x.kind === 'attempt_finished' && x.data.attempt_id === attemptId);
  if (!e || e.kind !== 'attempt_finished' || e.data.diagnostics === null)
    return html`<span class="muted">none recorded</span>`;
  if (isSealedPayload(e.data.diagnostics)) {
    return html`<span class="sealed"
      >sealed to the auditor key — not opened here (this view holds no key)</span
    >`;
  }
  return html`<pre class="diag" tabindex="0" aria-label="diagnostics">
${clip(JSON.stringify(redactor.redactValue(e.data.diagnostics), null, 2), 4000)}</pre>`;
}

/** The trace id of a recorded W3C traceparent; null when absent or not one. */
function traceIdOf(tp: string | undefined): string | null {
  const m = tp === undefined ? null : /^00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(tp);
  return m ? m[1]! : null;
}

/**
 * The traces of the calls that opened the operation and started its attempts (telemetry on), so
 * an investigator can open them in the tracing backend; later calls that settle it link to them.
 */
function traceLine(v: OperationView): Html {
  const traces = [...new Set(v.traceparents.map(traceIdOf).filter((t): t is string => t !== null))];
  if (traces.length === 0)
    return html`<p class="muted" data-trace-ids>No trace recorded (telemetry was off).</p>`;
  return html`<p data-trace-ids>
    Trace${traces.length > 1 ? 's' : ''} of the calls:
    ${traces.map((t, i) => html`${i > 0 ? ', ' : ''}<span class="mono" data-trace-id>${t}</span>`)}
  </p>`;
}

function attemptCard(
  a: AttemptView,
  first: AttemptView | undefined,
  events: readonly StoredEvent[],
  whole: string,
  operationEffect: RemoteEffect,
): Html {
  const f = a.finish;
  const lost = lostPhase(a);
  const fp =
    first && first !== a
      ? a.request_fingerprint === first.request_fingerprint
        ? ` (same as attempt ${first.number})`
        : ` (DIFFERS from attempt ${first.number})`
      : '';
  return html`<section class="card" aria-labelledby="att-${a.number}">
    <h3 id="att-${a.number}">
      Attempt ${a.number} <span class="mono muted">${a.attempt_id}</span>
    </h3>
    ${attemptPhasesSvg(a)} ${lost ? html`<p class="lost-note" data-lost>${lost}</p>` : ''}
    <dl class="facts">
      <dt>dispatch state</dt>
      <dd><strong>${f ? f.dispatch_state : 'not recorded'}</strong></dd>
      <dt>outcome</dt>
      <dd>
        ${f ? `${f.category} (rule ${f.rule}), retry ${f.retry}, remote effect ${attemptEffectText(f, operationEffect)}` : '–'}
      </dd>
      <dt>retry reason / decision</dt>
      <dd>
        ${dash(a.retry_reason)} /
        ${dash(a.retry_decision)}${a.retry_of_attempt_id ? ` (retry of ${a.retry_of_attempt_id})` : ''}
      </dd>
      <dt>budget left</dt>
      <dd>${a.attempt_budget_remaining}</dd>
      <dt>worker</dt>
      <dd class="mono">${ext(a.worker, whole)}</dd>
      <dt>credential</dt>
      <dd class="mono">${ext(a.credential_ref, whole)}</dd>
      <dt>request fingerprint</dt>
      <dd class="mono">${a.request_fingerprint}${fp}</dd>
      <dt>response</dt>
      <dd>
        ${f?.response ? html`status ${dash(f.response.status)}, remote ref ${ext(f.response.remote_ref, whole)}, replay ${f.response.replay ? 'yes' : 'no'}` : 'none'}
      </dd>
      <dt>trace</dt>
      <dd class="mono" data-attempt-trace>${traceIdOf(a.traceparent) ?? '–'}</dd>
      <dt>started / duration</dt>
      <dd>${iso(a.started_at)}${f ? ` · ${f.duration_ms} ms` : ''}</dd>
      <dt>diagnostics</dt>
      <dd>
        ${f?.diagnostics_ref ? html`<span class="mono">${f.diagnostics_ref}</span> ` : ''}${diagnosticsOf(events, a.attempt_id)}
      </dd>
    </dl>
  </section>`;
}

export function operationBody(
  v: OperationView,
  events: readonly StoredEvent[],
  hints: Hints,
): Html {
  const verdict = verdictOf(v);
  const settle = settleCommand(v, hints);
  const d = v.destination;
  // Where a value shown cut can be read whole: this operation's events as JSON text.
  const whole = `/op/${seg(v.operation_id)}/events.json`;
  return html`<div id="live-region" data-watch="${v.operation_id}">
    <p><a href="/">← Operations</a></p>
    <h1>
      Operation <span class="mono">${ext(v.operation_id, whole)}</span> ${stateBadge(v.state)}
    </h1>
    <div class="verdict ${verdict.tone}" role="note" aria-label="Verdict" data-verdict>
      ${clip(verdict.headline, 400)}<span class="sub">${clip(verdict.detail, 600)}</span>
    </div>
    <section class="card timeline" aria-labelledby="tl-h">
      <h2 id="tl-h">Timeline</h2>
      ${timelineSvg(v)}
      <ul class="legend" aria-hidden="true">
        <li><span class="sw connect"></span>connect</li>
        <li><span class="sw send"></span>request sent</li>
        <li><span class="sw wait"></span>waiting for first byte</li>
        <li><span class="sw body"></span>body</li>
        <li><span class="sw lost"></span>answer lost</li>
        <li><span class="sw obs"></span>observation</li>
        <li><span class="sw appr"></span>approval</li>
        <li><span class="sw res"></span>resolution</li>
      </ul>
      ${traceLine(v)}
      <h3>Timeline as text</h3>
      <ol class="textline" data-timeline-text>
        ${timelineText(v).map((l) => html`<li>${clip(l, 400)}</li>`)}
      </ol>
    </section>
    <div class="grid2">
      <section class="card" aria-labelledby="intent-h">
        <h2 id="intent-h">Intent</h2>
        <dl class="facts">
          <dt>kind</dt>
          <dd>${dash(v.intent?.kind)}</dd>
          <dt>subject</dt>
          <dd class="mono">${ext(v.intent?.subject_ref, whole)}</dd>
          <dt>params digest</dt>
          <dd class="mono">${ext(v.intent?.params_digest, whole)}</dd>
          <dt>action</dt>
          <dd>${ext(v.action, whole)} (${dash(v.action_class)})</dd>
          <dt>destination</dt>
          <dd class="mono">
            ${d ? clip([d.method, d.route_template, d.host_ref ? `host ${d.host_ref}` : undefined].filter(Boolean).join(' '), 200) : '–'}${d?.authority_ref ? ` via ${clip(d.authority_ref)}` : ''}
          </dd>
          <dt>idempotency key</dt>
          <dd class="mono">${ext(v.idempotency_key, whole)}</dd>
          <dt>session</dt>
          <dd>
            ${v.session_id ? html`<a class="mono" href="/sessions/${seg(v.session_id)}">${ext(v.session_id)}</a>` : '–'}
          </dd>
          <dt>correlation</dt>
          <dd class="mono">${ext(v.correlation_id, whole)}</dd>
          <dt>owner</dt>
          <dd class="mono">${ext(v.owner, whole)}</dd>
          <dt>caller</dt>
          <dd class="caller">${v.caller ? clip(callerText(v.caller), 400) : '– (not recorded)'}</dd>
          <dt>opened</dt>
          <dd>${iso(v.opened_at)}</dd>
          ${
            v.supersedes_operation_id
              ? html`<dt>supersedes</dt>
                  <dd>
                    <a class="mono" href="/op/${seg(v.supersedes_operation_id)}"
                      >${ext(v.supersedes_operation_id)}</a
                    >
                  </dd>`
              : ''
          }
          ${
            v.superseded_by
              ? html`<dt>superseded by</dt>
                  <dd>
                    <a class="mono" href="/op/${seg(v.superseded_by)}">${ext(v.superseded_by)}</a>
                  </dd>`
              : ''
          }
        </dl>
      </section>
      <section class="card" aria-labelledby="settle-h">
        <h2 id="settle-h">What settles it</h2>
        <p>${settle.why}</p>
        ${settle.commands.map((c) => html`<pre class="cmd" data-command>${c}</pre>`)}
        ${v.resolution ? html`<p>Resolved <strong>${v.resolution.state}</strong> (${v.resolution.category}) by ${v.resolution.by} at ${iso(v.resolution.at)}${v.resolution.remote_refs.length ? html`; remote records <span class="mono" data-remote-refs>${v.resolution.remote_refs.map((r, i) => html`${i > 0 ? ', ' : ''}${ext(r, whole)}`)}</span>` : ''}</p>` : ''}
      </section>
    </div>
    <h2>Attempts (${v.attempts.length})</h2>
    ${v.attempts.length === 0 ? html`<p class="muted">No attempt was started.</p>` : v.attempts.map((a) => attemptCard(a, v.attempts[0], events, whole, v.remote_effect))}
    <h2>Observations (${v.observations.length})</h2>
    ${
      v.observations.length === 0
        ? html`<p class="muted">No observation recorded.</p>`
        : html`<table aria-label="Observations">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Source</th>
                <th scope="col">Checked</th>
                <th scope="col">Matches</th>
                <th scope="col">Remote records</th>
                <th scope="col">Conclusion</th>
                <th scope="col">State after</th>
              </tr>
            </thead>
            <tbody>
              ${v.observations.map(
                (o) =>
                  html`<tr${o.matches > 1 ? html` class="prio-0"` : ''}><td>${iso(o.checked_at)}</td><td>${o.source}</td><td class="mono">${ext(o.checked, whole)}</td><td>${o.matches > 1 ? html`<span class="flag">${o.matches}</span>` : o.matches}</td><td class="mono" data-obs-refs>${o.remote_refs.length ? o.remote_refs.map((r, i) => html`${i > 0 ? ', ' : ''}${ext(r, whole)}`) : '–'}</td><td>${o.conclusion}</td><td>${stateBadge(o.state_after)}</td></tr>`,
              )}
            </tbody>
          </table>`
    }
    <h2>Policy decisions (${v.policies.length})</h2>
    ${
      v.policies.length === 0
        ? html`<p class="muted">No policy decided this operation.</p>`
        : html`<table aria-label="Policy decisions">
            <thead>
              <tr>
                <th scope="col">Attempt</th>
                <th scope="col">Decision</th>
                <th scope="col">Policies</th>
                <th scope="col">Reason</th>
                <th scope="col">Principal</th>
                <th scope="col">Context digest</th>
                <th scope="col">At</th>
              </tr>
            </thead>
            <tbody>
              ${v.policies.map(
                (p) =>
                  html`<tr>
                    <td>${p.attempt}</td>
                    <td>${p.decision}</td>
                    <td class="mono">${p.policy_ids.length ? p.policy_ids.join(', ') : '–'}</td>
                    <td>${p.reason}</td>
                    <td class="mono">${p.principal}</td>
                    <td class="mono">${dash(p.context_digest || null)}</td>
                    <td>${iso(p.at)}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
    <h2>Approvals (${v.approvals.length}, ${v.prompts} prompt(s))</h2>
    ${
      v.approvals.length === 0
        ? html`<p class="muted">No approval was asked.</p>`
        : html`<table aria-label="Approvals">
            <thead>
              <tr>
                <th scope="col">Approval</th>
                <th scope="col">Scope</th>
                <th scope="col">Asked</th>
                <th scope="col">Decision</th>
                <th scope="col">By</th>
                <th scope="col">Decided</th>
              </tr>
            </thead>
            <tbody>
              ${v.approvals.map(
                (a) =>
                  html`<tr>
                    <td class="mono">${a.approval_id}</td>
                    <td>${a.scope}</td>
                    <td>${iso(a.requested_at)}</td>
                    <td>${a.decision ?? 'pending'}</td>
                    <td>${dash(a.approver)}</td>
                    <td>${iso(a.decided_at)}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
  </div>`;
}
