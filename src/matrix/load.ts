// Loads a matrix file; a bad file names the file, line and field.
import { readFile } from 'node:fs/promises';
import { LineCounter, parseDocument, isNode } from 'yaml';
import { matrixSchema, type Matrix } from './spec.js';

export type LoadResult =
  | { ok: true; value: Matrix; failure?: never }
  | { ok: false; failure: { kind: 'unreadable' | 'invalid'; message: string }; value?: never };

export async function loadMatrix(file: string): Promise<LoadResult> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    return {
      ok: false,
      failure: {
        kind: 'unreadable',
        message: `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? 'error'}`,
      },
    };
  }
  return parseMatrix(text, file);
}

export function parseMatrix(text: string, file = '<matrix>'): LoadResult {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  if (doc.errors.length) {
    const err = doc.errors[0]!;
    const pos = lines.linePos(err.pos[0]);
    return {
      ok: false,
      failure: {
        kind: 'invalid',
        message: `${file}:${pos.line}:${pos.col}: ${err.message.split('\n')[0]}`,
      },
    };
  }
  const parsed = matrixSchema.safeParse(doc.toJS());
  if (parsed.success) {
    const ids = new Set<string>();
    for (const [i, r] of parsed.data.rows.entries()) {
      if (ids.has(r.id))
        return {
          ok: false,
          failure: {
            kind: 'invalid',
            message: `${file}: rows.${i}.id: duplicate row id "${r.id}"`,
          },
        };
      ids.add(r.id);
    }
    return { ok: true, value: parsed.data };
  }
  const issue = parsed.error.issues[0]!;
  const path = issue.path.map(String);
  let where = file;
  for (let n = path.length; n >= 0; n--) {
    const node = doc.getIn(path.slice(0, n), true);
    if (isNode(node) && node.range) {
      const pos = lines.linePos(node.range[0]);
      where = `${file}:${pos.line}:${pos.col}`;
      break;
    }
  }
  return {
    ok: false,
    failure: {
      kind: 'invalid',
      message: `${where}: ${path.join('.') || '(root)'}: ${issue.message}`,
    },
  };
}
