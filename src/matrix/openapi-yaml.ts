// The YAML text of a generated configuration, written directly from its plain JSON value: the
// yaml library's document model costs ~2 µs and several objects per node, which for a document of
// 11,000 operations (Microsoft Graph: 30 MB of YAML) was most of `candor init`'s time and memory.
// The value holds only what JSON holds (maps, lists, strings, numbers, booleans, null); a string
// that is not plainly safe is written as a JSON string, which YAML reads as the same text.
// `candor init` parses a small result back and compares; the tests do so for GitHub's.

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Whether a map or list is written on one line (`{ a: 1 }`); the rest is block style. */
export type FlowRule = (value: Obj | unknown[], path: readonly string[]) => boolean;

/** Words YAML 1.1 or 1.2 reads as something other than a string. */
const KEYWORDS = new Set(['true', 'false', 'null', 'yes', 'no', 'on', 'off', 'y', 'n', '~']);

/** Text YAML reads back as the same string without quotes (letters first, no indicators). */
const PLAIN = /^[A-Za-z/][A-Za-z0-9 _./()+-]*$/;

export function scalar(v: unknown): string {
  if (typeof v === 'string') {
    if (PLAIN.test(v) && !v.endsWith(' ') && !v.includes('  ') && !KEYWORDS.has(v.toLowerCase()))
      return v;
    return JSON.stringify(v);
  }
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : JSON.stringify(String(v));
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  return 'null';
}

function isEmpty(v: unknown): boolean {
  return Array.isArray(v) ? v.length === 0 : isObj(v) && Object.keys(v).length === 0;
}

/** `{ a: 1, b: [ x, y ] }` */
export function flow(v: unknown): string {
  if (Array.isArray(v)) return v.length ? `[ ${v.map(flow).join(', ')} ]` : '[]';
  if (isObj(v)) {
    const parts = Object.entries(v).map(([k, x]) => `${scalar(k)}: ${flow(x)}`);
    return parts.length ? `{ ${parts.join(', ')} }` : '{}';
  }
  return scalar(v);
}

function comment(lines: readonly string[] | undefined, pad: string, out: string[]): void {
  if (lines === undefined) return;
  for (const c of lines)
    for (const l of c.split('\n')) out.push(`${pad}#${l === '' ? '' : ` ${l}`}`);
}

export interface YamlWriter {
  flowRule: FlowRule;
  /** Comment lines before a map key or list item, by its path (`actions`, `3`). */
  commentOf?: (path: readonly string[]) => readonly string[] | undefined;
}

/** The YAML text of a value (a map at the top), with a comment above it. */
export function writeYaml(value: Obj, header: readonly string[], w: YamlWriter): string {
  const out: string[] = [];
  comment(header, '', out);
  blockMap(value, '', [], w, out);
  return `${out.join('\n')}\n`;
}

function inline(v: unknown, path: readonly string[], w: YamlWriter): string | undefined {
  if (!isObj(v) && !Array.isArray(v)) return scalar(v);
  if (isEmpty(v) || w.flowRule(v, path)) return flow(v);
  return undefined;
}

function blockMap(
  v: Obj,
  pad: string,
  path: readonly string[],
  w: YamlWriter,
  out: string[],
  firstPrefix?: string,
): void {
  let first = true;
  for (const [k, x] of Object.entries(v)) {
    const at = [...path, k];
    comment(w.commentOf?.(at), pad, out);
    const lead = first && firstPrefix !== undefined ? firstPrefix : pad;
    first = false;
    const one = inline(x, at, w);
    if (one !== undefined) out.push(`${lead}${scalar(k)}: ${one}`);
    else {
      out.push(`${lead}${scalar(k)}:`);
      if (Array.isArray(x)) blockSeq(x, `${pad}  `, at, w, out);
      else blockMap(x as Obj, `${pad}  `, at, w, out);
    }
  }
}

function blockSeq(
  v: unknown[],
  pad: string,
  path: readonly string[],
  w: YamlWriter,
  out: string[],
): void {
  v.forEach((x, i) => {
    const at = [...path, String(i)];
    comment(w.commentOf?.(at), pad, out);
    const one = inline(x, at, w);
    if (one !== undefined) out.push(`${pad}- ${one}`);
    else if (Array.isArray(x)) {
      out.push(`${pad}-`);
      blockSeq(x, `${pad}  `, at, w, out);
    } else blockMap(x as Obj, `${pad}  `, at, w, out, `${pad}- `);
  });
}
