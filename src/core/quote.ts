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
  return quoted(s, max, 'end');
}

/**
 * A file path as `quote` writes it, but cut at the front when too long: the end of a path (the
 * file's own name, its folder) is what tells a reader which file is meant —
 * `"…/run-3/trusted.cp" (61 characters)`.
 */
export function quotePath(s: string, max = 60): string {
  return quoted(s, max, 'start');
}

/** `quote` and `quotePath`: which end of a too-long `s` is cut. */
function quoted(s: string, max: number, cutAt: 'start' | 'end'): string {
  // Only the part that can be shown is split into code points (a huge `s` is not).
  const room = max * 2 + 8;
  const near = s.length <= room ? s : cutAt === 'end' ? s.slice(0, room) : s.slice(-room);
  const points = Array.from(near);
  const cut = points.length > max;
  const shown = !cut
    ? s
    : cutAt === 'end'
      ? `${points.slice(0, max).join('')}…`
      : `…${points.slice(-max).join('')}`;
  return `${escapeUnsafe(JSON.stringify(shown))}${cut ? ` (${s.length} characters)` : ''}`;
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
