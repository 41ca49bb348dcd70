// Server-rendered HTML with escaping by default: every interpolated value is escaped unless it is
// already `Html` (the output of another `html` template). Ledger text is data written by agents
// and remote services; it must never become markup in the investigator's browser.
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
