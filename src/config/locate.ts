// Maps a field path of the parsed configuration back to its place in the YAML text, so every
// problem is reported as `FILE:LINE:COL: field.path: problem`.
import { isMap, isPair, isScalar, isSeq, type Document, type LineCounter, type Node } from 'yaml';

export type FieldPath = ReadonlyArray<string | number>;

export interface ConfigIssue {
  file: string;
  line: number;
  col: number;
  /** `actions[0].request.method`; empty for the whole document. */
  field: string;
  problem: string;
}

export function formatIssue(i: ConfigIssue): string {
  return `${i.file}:${i.line}:${i.col}: ${i.field === '' ? '(file)' : i.field}: ${i.problem}`;
}

export function fieldName(path: FieldPath): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? seg : `.${seg}`;
  }
  return out;
}

function childOf(
  node: unknown,
  seg: string | number,
): { key: Node | null; value: Node | null } | null {
  if (isMap(node)) {
    for (const pair of node.items) {
      if (!isPair(pair)) continue;
      const k = pair.key;
      const name = isScalar(k) ? String(k.value) : null;
      if (name === String(seg))
        return { key: k as Node, value: (pair.value as Node | null) ?? null };
    }
    return null;
  }
  if (isSeq(node) && typeof seg === 'number') {
    const item = node.items[seg];
    return item === undefined ? null : { key: null, value: item as Node };
  }
  return null;
}

/**
 * The offset of a path in the document: the value's start, or the key's when `at: 'key'` (unknown
 * keys) or when the value is empty. A path that leaves the document points at the deepest node
 * that exists (e.g. the object missing a required field).
 */
export function offsetOf(doc: Document, path: FieldPath, at: 'value' | 'key' = 'value'): number {
  let node: unknown = doc.contents;
  let offset = doc.contents?.range?.[0] ?? 0;
  for (let i = 0; i < path.length; i++) {
    const child = childOf(node, path[i]!);
    if (!child) return offset;
    const last = i === path.length - 1;
    const keyStart = child.key?.range?.[0];
    const valueStart = child.value?.range?.[0];
    offset = (last && at === 'key' ? keyStart : (valueStart ?? keyStart)) ?? offset;
    node = child.value;
  }
  return offset;
}

export function issueAt(
  file: string,
  doc: Document,
  lines: LineCounter,
  path: FieldPath,
  problem: string,
  at: 'value' | 'key' = 'value',
): ConfigIssue {
  const pos = lines.linePos(offsetOf(doc, path, at));
  return { file, line: pos.line, col: pos.col, field: fieldName(path), problem };
}
