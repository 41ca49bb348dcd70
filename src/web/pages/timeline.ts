// The timeline of one operation on a time axis (SVG): each attempt a bar split into its phases
// (connect, request sent, waiting for the first byte, body), the phase where the answer was lost
// hatched, and observations, approvals and the resolution as marks. Every mark also has a line in
// the text equivalent (`timelineText`), which is what screen readers and copy-paste get.
import type { AttemptView, OperationView } from '../../ledger/projection.js';
import { html, type Html } from '../html.js';

type Phase = 'connect' | 'send' | 'wait' | 'body';
const PHASE_NAME: Record<Phase, string> = {
  connect: 'connect',
  send: 'request sent',
  wait: 'waiting for first byte',
  body: 'body',
};

interface Segment {
  phase: Phase;
  from: number;
  to: number;
  lost: boolean;
}

/** Where the answer of an attempt was lost, in words; null when nothing was lost. */
export function lostPhase(a: AttemptView): string | null {
  const f = a.finish;
  if (!f)
    return 'no finish recorded: the request may have been sent (the process stopped or is still waiting)';
  if (f.dispatch_state !== 'sent_no_response' && f.dispatch_state !== 'execution_error')
    return null;
  const p = f.phases;
  if (p.headers_at !== undefined)
    return 'answer lost during the response body, after the first byte';
  if (p.request_sent_at !== undefined)
    return 'answer lost after the request was sent, before the first response byte';
  if (p.connected_at !== undefined) return 'lost while the request was being sent';
  return 'lost after dispatch began, before the connection was confirmed';
}

export function segments(a: AttemptView): Segment[] {
  const f = a.finish;
  if (!f) return [];
  const p = f.phases;
  const start = p.started_at ?? a.started_at;
  const end = p.finished_at ?? f.finished_at;
  const lost = f.dispatch_state === 'sent_no_response' || f.dispatch_state === 'execution_error';
  const marks: [Phase, number | undefined][] = [
    ['connect', p.connected_at],
    ['send', p.request_sent_at],
    ['wait', p.headers_at],
    ['body', end],
  ];
  const out: Segment[] = [];
  let at = start;
  let i = 0;
  for (; i < marks.length; i++) {
    const [phase, t] = marks[i]!;
    if (t === undefined) continue;
    if (phase === 'body' && p.headers_at === undefined) break;
    out.push({ phase, from: at, to: Math.max(at, t), lost: false });
    at = Math.max(at, t);
  }
  if (p.headers_at === undefined && f.dispatch_state !== 'not_sent') {
    // No first byte: the time after the last known phase went to waiting (or sending).
    const phase: Phase = p.request_sent_at !== undefined ? 'wait' : 'send';
    out.push({ phase, from: at, to: Math.max(at, end), lost });
  } else if (lost && out.length > 0) {
    out[out.length - 1]!.lost = true;
  }
  return out.filter((s) => s.to > s.from || s.lost);
}

interface Mark {
  at: number;
  kind: 'obs' | 'appr' | 'res';
  label: string;
  dup: boolean;
}

function marks(v: OperationView): Mark[] {
  const out: Mark[] = [];
  for (const o of v.observations)
    out.push({
      at: o.at,
      kind: 'obs',
      label: `${o.source}: ${o.matches} match${o.matches === 1 ? '' : 'es'}`,
      dup: o.matches > 1,
    });
  for (const ap of v.approvals) {
    out.push({ at: ap.requested_at, kind: 'appr', label: 'approval asked', dup: false });
    if (ap.decided_at !== null)
      out.push({
        at: ap.decided_at,
        kind: 'appr',
        label: `approval ${ap.decision ?? ''}`,
        dup: false,
      });
  }
  if (v.resolution)
    out.push({
      at: v.resolution.at,
      kind: 'res',
      label: `resolved ${v.resolution.state}`,
      dup: false,
    });
  return out;
}

function span(v: OperationView): [number, number] {
  const times = [
    v.opened_at ?? Infinity,
    ...v.attempts.flatMap((a) => [
      a.started_at,
      a.finish?.phases.finished_at ?? a.finish?.finished_at ?? a.started_at,
    ]),
    ...marks(v).map((m) => m.at),
  ].filter((t) => Number.isFinite(t));
  const t0 = Math.min(...times);
  const t1 = Math.max(...times);
  return [t0, t1 > t0 ? t1 : t0 + 1];
}

const W = 1000;
const X0 = 150;
const X1 = 975;

export function timelineSvg(v: OperationView): Html {
  const [t0, t1] = span(v);
  const x = (t: number): number => X0 + ((t - t0) / (t1 - t0)) * (X1 - X0);
  const rowH = 34;
  const ms = marks(v);
  const top = 30;
  const evidenceY = top + v.attempts.length * rowH + 14;
  const height = evidenceY + (ms.length > 0 ? 26 + 16 * Math.min(ms.length, 6) : 10) + 24;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => t0 + f * (t1 - t0));
  const bars = v.attempts.map((a, i) => {
    const y = top + i * rowH;
    const segs = segments(a);
    const label = html`<text x="8" y="${y + 14}">attempt ${a.number}</text>`;
    if (!a.finish) {
      return html`${label}<rect
          class="ph-none"
          x="${x(a.started_at).toFixed(1)}"
          y="${y}"
          width="${Math.max(6, X1 - x(a.started_at)).toFixed(1)}"
          height="18"
          ><title>attempt ${a.number}: no finish recorded</title></rect
        >`;
    }
    if (segs.length === 0) {
      return html`${label}<rect
          class="ph-none"
          x="${x(a.started_at).toFixed(1)}"
          y="${y}"
          width="6"
          height="18"
          ><title>attempt ${a.number}: never left (${a.finish.dispatch_state})</title></rect
        ><text x="${(x(a.started_at) + 10).toFixed(1)}" y="${y + 14}">not sent</text>`;
    }
    return html`${label}${segs.map((s) => {
      const w = Math.max(3, x(s.to) - x(s.from));
      return html`<rect
        class="${s.lost ? 'ph-lost' : `ph-${s.phase}`}"
        x="${x(s.from).toFixed(1)}"
        y="${y}"
        width="${w.toFixed(1)}"
        height="18"
        ><title>
          attempt ${a.number}: ${PHASE_NAME[s.phase]} ${Math.round(s.to - s.from)}
          ms${s.lost ? ' — answer lost here' : ''}
        </title></rect
      >`;
    })}`;
  });
  const markEls = ms.map((m, i) => {
    const cx = x(m.at);
    const ly = evidenceY + 26 + 16 * (i % 6);
    const shape =
      m.kind === 'obs'
        ? html`<path
            class="mark-obs${m.dup ? ' dup' : ''}"
            d="M${cx.toFixed(1)} ${evidenceY} l7 7 l-7 7 l-7 -7 z"
          ></path>`
        : m.kind === 'appr'
          ? html`<circle
              class="mark-appr"
              cx="${cx.toFixed(1)}"
              cy="${evidenceY + 7}"
              r="6"
            ></circle>`
          : html`<path
              class="mark-res"
              d="M${cx.toFixed(1)} ${evidenceY} v14 M${cx.toFixed(1)} ${evidenceY} h10 v6 h-10 z"
            ></path>`;
    const anchor = cx > X1 - 200 ? 'end' : 'start';
    return html`<g
      >${shape}<line
        x1="${cx.toFixed(1)}"
        y1="${evidenceY + 14}"
        x2="${cx.toFixed(1)}"
        y2="${ly - 4}"
        stroke="#9aa3b2"
        stroke-dasharray="2 2"
      ></line
      ><text
        x="${(anchor === 'end' ? cx - 4 : cx + 4).toFixed(1)}"
        y="${ly + 4}"
        text-anchor="${anchor}"
        ${m.dup ? html` class="dup-label"` : ''}
        >${m.label}</text
      ><title>${m.label} at +${Math.round(m.at - t0)} ms</title></g
    >`;
  });
  return html`<svg
    viewBox="0 0 ${W} ${height}"
    role="img"
    aria-labelledby="tl-title tl-desc"
    xmlns="http://www.w3.org/2000/svg"
  >
    <title id="tl-title">Timeline of ${v.operation_id}</title>
    <desc id="tl-desc">${timelineText(v).join('. ')}</desc>
    <defs>
      <pattern
        id="lost"
        width="6"
        height="6"
        patternUnits="userSpaceOnUse"
        patternTransform="rotate(45)"
      >
        <rect width="6" height="6" fill="#fde7e8"></rect>
        <line x1="0" y1="0" x2="0" y2="6" stroke="#a3141c" stroke-width="3"></line>
      </pattern>
    </defs>
    <g class="axis">
      ${ticks.map(
        (t) =>
          html`<line
              x1="${x(t).toFixed(1)}"
              y1="16"
              x2="${x(t).toFixed(1)}"
              y2="${height - 20}"
            ></line
            ><text x="${x(t).toFixed(1)}" y="${height - 6}" text-anchor="middle"
              >+${Math.round(t - t0)} ms</text
            >`,
      )}
      <text x="8" y="12">time since opened</text>
    </g>
    ${bars} ${ms.length > 0 ? html`<text x="8" y="${evidenceY + 12}">evidence</text>` : ''}
    ${markEls}
  </svg>`;
}

/** The timeline in words, one line per step, in time order. */
export function timelineText(v: OperationView): string[] {
  const [t0] = span(v);
  const rel = (t: number): string => `+${Math.round(t - t0)} ms`;
  const lines: { at: number; text: string }[] = [];
  if (v.opened_at !== null)
    lines.push({
      at: v.opened_at,
      text: `${rel(v.opened_at)} operation opened (${v.action ?? 'unknown action'})`,
    });
  for (const a of v.attempts) {
    const segs = segments(a);
    const parts = segs.map(
      (s) =>
        `${PHASE_NAME[s.phase]} ${Math.round(s.to - s.from)} ms${s.lost ? ' (answer lost here)' : ''}`,
    );
    const f = a.finish;
    const outcome = f ? `${f.dispatch_state}, ${f.category}` : 'no finish recorded';
    lines.push({
      at: a.started_at,
      text: `${rel(a.started_at)} attempt ${a.number} started${a.retry_reason ? ` (retry: ${a.retry_reason}, decision ${a.retry_decision ?? 'none'})` : ''}: ${parts.length ? parts.join(', ') : 'no phase recorded'}; ${outcome}`,
    });
    const lost = lostPhase(a);
    if (lost)
      lines.push({
        at: f?.finished_at ?? a.started_at,
        text: `${rel(f?.finished_at ?? a.started_at)} attempt ${a.number}: ${lost}`,
      });
  }
  for (const m of marks(v)) lines.push({ at: m.at, text: `${rel(m.at)} ${m.label}` });
  return lines.sort((a, b) => a.at - b.at).map((l) => l.text);
}

/** One attempt's phases on its own scale, labelled, so short phases stay readable. */
export function attemptPhasesSvg(a: AttemptView): Html {
  const segs = segments(a);
  if (segs.length === 0) return html``;
  const from = segs[0]!.from;
  const to = Math.max(segs[segs.length - 1]!.to, from + 1);
  const total = to - from;
  const label = (s: Segment): string =>
    `${PHASE_NAME[s.phase]} · ${Math.round(s.to - s.from)} ms${s.lost ? ' · LOST' : ''}`;
  // Every segment gets room for its label; the rest of the width is shared by duration.
  const need = segs.map((s) => label(s).length * 6.8 + 14);
  const free = Math.max(0, 1000 - need.reduce((x, y) => x + y, 0));
  let cursor = 0;
  const rects = segs.map((s, i) => {
    const w = need[i]! + (free * (s.to - s.from)) / total;
    const r = html`<rect
        class="${s.lost ? 'ph-lost' : `ph-${s.phase}`}"
        x="${cursor.toFixed(1)}"
        y="0"
        width="${(w - 2).toFixed(1)}"
        height="22"
      ></rect
      ><text x="${(cursor + 4).toFixed(1)}" y="38">${label(s)}</text>`;
    cursor += w;
    return r;
  });
  const width = Math.max(1000, Math.ceil(cursor));
  return html`<svg
    viewBox="0 0 ${width} 44"
    role="img"
    aria-label="phases of attempt ${a.number}: ${segs.map((s) => `${PHASE_NAME[s.phase]} ${Math.round(s.to - s.from)} ms${s.lost ? ' (lost)' : ''}`).join(', ')}"
    xmlns="http://www.w3.org/2000/svg"
  >
    ${rects}
  </svg>`;
}
