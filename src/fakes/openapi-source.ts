// The text of an OpenAPI document and what a message about it needs: the parsed value, a JSON
// pointer's line and column (found only when a message needs one, so a 13 MB document is parsed
// once, by JSON.parse), and `$ref` resolution inside the document. References to other local
// files are bundled first (by @readme/openapi-parser); a document never makes Candor fetch a URL.
import { resolve as resolvePath } from 'node:path';
import { bundle } from '@readme/openapi-parser';
import { LineCounter, parseDocument, isMap, isSeq, type Node } from 'yaml';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface Source {
  file: string;
  root: unknown;
  /** `12:5` for a JSON pointer (`/paths/~1pets/post`), or undefined where the text has no node. */
  locate(pointer: string): string | undefined;
}

export type SourceResult =
  { ok: true; value: Source; failure?: never } | { ok: false; failure: string; value?: never };

/** `/paths/~1pets/get` → `['paths', '/pets', 'get']`. */
export function segmentsOf(pointer: string): string[] {
  if (pointer === '' || pointer === '/') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

export function pointerOf(segments: ReadonlyArray<string | number>): string {
  return segments.map((s) => `/${String(s).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

function lineCol(text: string, offset: number): string {
  let line = 1;
  let last = -1;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    last = i;
  }
  return `${line}:${offset - last}`;
}

/** Parses JSON (fast path) or YAML; a syntax error is one line with its line and column. */
export function parseSource(text: string, file: string): SourceResult {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{')) {
    try {
      const root: unknown = JSON.parse(text);
      return {
        ok: true,
        value: {
          file,
          root,
          locate: (pointer) => {
            const at = jsonOffset(text, segmentsOf(pointer));
            return at === undefined ? undefined : lineCol(text, at);
          },
        },
      };
    } catch {
      // Not strict JSON (comments, trailing commas): YAML reads it and says where it breaks.
    }
  }
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, uniqueKeys: false, prettyErrors: false });
  const error = doc.errors[0];
  if (error !== undefined) {
    const pos = counter.linePos(error.pos[0]);
    return {
      ok: false,
      failure: `${file}:${pos.line}:${pos.col}: ${error.message.split('\n')[0] ?? 'cannot parse'}`,
    };
  }
  let root: unknown;
  try {
    root = doc.toJS({ maxAliasCount: -1 });
  } catch (e) {
    return { ok: false, failure: `${file}: ${e instanceof Error ? e.message : String(e)}` };
  }
  return {
    ok: true,
    value: {
      file,
      root,
      locate: (pointer) => {
        let node: unknown = doc.contents;
        for (const seg of segmentsOf(pointer)) {
          if (isMap(node)) node = node.get(seg, true);
          else if (isSeq(node)) node = node.get(Number(seg), true);
          else return undefined;
        }
        const range = (node as Node | undefined)?.range;
        if (!range) return undefined;
        const pos = counter.linePos(range[0]);
        return `${pos.line}:${pos.col}`;
      },
    },
  };
}

/** Whether any `$ref` names another file (then the document is bundled before it is read). */
export function hasExternalRefs(root: unknown): boolean {
  const stack: unknown[] = [root];
  while (stack.length) {
    const v = stack.pop();
    if (Array.isArray(v)) stack.push(...(v as unknown[]));
    else if (isObj(v)) {
      if (typeof v.$ref === 'string' && !v.$ref.startsWith('#')) return true;
      for (const x of Object.values(v)) if (typeof x === 'object' && x !== null) stack.push(x);
    }
  }
  return false;
}

/** External file references inlined as internal ones; http(s) references are refused. */
export async function bundled(source: Source): Promise<SourceResult> {
  try {
    // Given the path, the bundler resolves relative references against the document's folder.
    const root: unknown = await bundle(resolvePath(source.file), {
      resolve: { http: false },
    } as never);
    return { ok: true, value: { ...source, root, locate: () => undefined } };
  } catch (e) {
    const msg = (e instanceof Error ? e.message : String(e)).split('\n')[0] ?? '';
    return { ok: false, failure: `${source.file}: a $ref to another file cannot be read: ${msg}` };
  }
}

/** The value a local `$ref` (`#/components/schemas/Pet`) names, or undefined. */
export function resolvePointer(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  let node: unknown = root;
  for (const raw of segmentsOf(ref.slice(1))) {
    let seg = raw;
    try {
      seg = decodeURIComponent(raw);
    } catch {
      // A stray `%` is a literal.
    }
    if (Array.isArray(node)) node = node[Number(seg)];
    else if (isObj(node) && Object.hasOwn(node, seg)) node = node[seg];
    else return undefined;
  }
  return node;
}

/**
 * Where the value at `path` starts in JSON text: a scan that skips every sibling it passes, so
 * finding one place costs one pass over the text before it, and nothing is built.
 */
export function jsonOffset(text: string, path: string[]): number | undefined {
  let i = 0;
  const ws = (): void => {
    while (
      i < text.length &&
      (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')
    )
      i++;
  };
  const str = (): string => {
    let j = i + 1;
    while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
    const raw = text.slice(i, j + 1);
    i = j + 1;
    return JSON.parse(raw) as string;
  };
  const skip = (): void => {
    ws();
    const c = text[i];
    if (c === '"') {
      str();
      return;
    }
    if (c === '{' || c === '[') {
      let depth = 0;
      while (i < text.length) {
        const ch = text[i];
        if (ch === '"') {
          str();
          continue;
        }
        if (ch === '{' || ch === '[') depth++;
        else if (ch === '}' || ch === ']') {
          depth--;
          if (depth === 0) {
            i++;
            return;
          }
        }
        i++;
      }
      return;
    }
    while (i < text.length && !',}] \n\r\t'.includes(text[i]!)) i++;
  };
  for (const seg of path) {
    ws();
    if (text[i] === '{') {
      i++;
      for (;;) {
        ws();
        if (text[i] !== '"') return undefined;
        const key = str();
        ws();
        i++; // the colon
        if (key === seg) break;
        skip();
        ws();
        if (text[i] !== ',') return undefined;
        i++;
      }
    } else if (text[i] === '[') {
      i++;
      const n = Number(seg);
      if (!Number.isInteger(n)) return undefined;
      for (let k = 0; k < n; k++) {
        skip();
        ws();
        if (text[i] !== ',') return undefined;
        i++;
      }
    } else return undefined;
  }
  ws();
  return i < text.length ? i : undefined;
}
