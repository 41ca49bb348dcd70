// Server-rendered HTML with escaping by default: every interpolated value is escaped unless it is
// already `Html` (the output of another `html` template). Ledger text is data written by agents
// and remote services; it must never become markup in the investigator's browser.
import { escapeUnsafe } from '../core/quote.js';

export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export type Part = Html | string | number | boolean | null | undefined | readonly Part[];

export const escapeHtml = (s: string): string =>
  s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');

function render(p: Part): string {
  if (p === null || p === undefined || p === false) return '';
  if (p instanceof Html) return p.text;
  if (Array.isArray(p)) return p.map(render).join('');
  return escapeHtml(String(p));
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

/** Trusted markup (only for constants written in this folder). */
export const raw = (s: string): Html => new Html(s);

export const iso = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? '–' : new Date(ms).toISOString().replace('T', ' ').slice(0, 23);

export const dash = (v: string | number | null | undefined): string =>
  v === null || v === undefined || v === '' ? '–' : String(v);

/** A query string from the set values, for links that keep the current filters. */
export function qs(params: Record<string, string | number | undefined>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') u.set(k, String(v));
  const s = u.toString();
  return s ? `?${s}` : '';
}

/** Outside text shown in a page: at most this many characters (the rest one click away). */
export const SHOWN_CHARS = 80;

/**
 * Outside text (a remote id, a subject, a correlation id) for a sentence: cut to `max` code points
 * with the full length noted, and every control, line-separator and bidi character written as a
 * visible `\uXXXX` — a right-to-left override in a remote id must not reorder the page around it.
 */
export function clip(s: string, max = SHOWN_CHARS): string {
  return clipped(s, max).text;
}

function clipped(s: string, max: number): { text: string; cut: boolean } {
  const head = s.length > max * 2 + 8 ? s.slice(0, max * 2 + 8) : s;
  const points = Array.from(head);
  const cut = points.length > max;
  const shown = cut ? points.slice(0, max).join('') : head;
  return {
    text: `${escapeUnsafe(shown)}${cut ? `… (${s.length} characters)` : ''}`,
    cut,
  };
}

/**
 * Outside text as its own element: cut (`clip`), escaped, bidi-isolated (`<bdi>`), and when cut a
 * link to `whole` where it can be read in full.
 */
export function ext(s: string | null | undefined, whole?: string, max = SHOWN_CHARS): Html {
  if (s === null || s === undefined || s === '') return html`–`;
  const c = clipped(s, max);
  return html`<bdi class="ext">${c.text}</bdi
    >${c.cut && whole ? html` <a class="whole" href="${whole}">show all</a>` : ''}`;
}

/** One path segment of a link: an id from the ledger is data, never part of the path syntax. */
export const seg = (id: string): string => encodeURIComponent(id);
