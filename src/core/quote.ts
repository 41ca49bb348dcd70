// Outside text (a bundle's origin, a witness's answer, a remote id) inside one of Candor's own
// messages: always cut and escaped, so a hostile or broken peer can neither make a message
// arbitrarily long nor break the line, reorder it on screen (bidi controls) or hide part of it.

/** Characters that must never reach a terminal or a log line raw. */
// C0/C1 controls, line/paragraph separators, bidi embeddings/overrides/isolates and marks.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/gu;

/** `s` with every unsafe character written as `\uXXXX` (nothing else changes). */
export function escapeUnsafe(s: string): string {
  return s.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * `s` cut to at most `max` code points (an ellipsis and the full length mark the cut), with unsafe
 * characters escaped and JSON-quoted: `"ab…" (1048576 characters)`. Never splits a surrogate pair.
 */
export function quote(s: string, max = 60): string {
  const points = Array.from(s.length > max * 2 + 8 ? s.slice(0, max * 2 + 8) : s);
  const cut = points.length > max;
  const head = cut ? `${points.slice(0, max).join('')}…` : s;
  return `${escapeUnsafe(JSON.stringify(head))}${cut ? ` (${s.length} characters)` : ''}`;
}

/**
 * A file path as `quote` writes it, but cut at the front when too long: the end of a path (the
 * file's own name, its folder) is what tells a reader which file is meant —
 * `"…/run-3/trusted.cp" (61 characters)`.
 */
export function quotePath(s: string, max = 60): string {
  const points = Array.from(s.length > max * 2 + 8 ? s.slice(-(max * 2 + 8)) : s);
  const cut = points.length > max;
  const tail = cut ? `…${points.slice(-max).join('')}` : s;
  return `${escapeUnsafe(JSON.stringify(tail))}${cut ? ` (${s.length} characters)` : ''}`;
}

/** A whole message capped at `max` characters (default 200), for lines built around outside text. */
export function capLine(message: string, max = 200): string {
  const clean = escapeUnsafe(message);
  if (clean.length <= max) return clean;
  let out = '';
  for (const c of clean) {
    if (out.length + c.length > max - 1) break;
    out += c;
  }
  return `${out}…`;
}
