// The import graph of src/ (non-test TypeScript files), read with the TypeScript parser: every
// relative `import … from`, `export … from` and `import('…')` with a literal specifier. Each edge
// says whether it exists at run time: `import type` / `export type` and imports whose every
// specifier is `type` are erased by the compiler (verbatimModuleSyntax), and `import()` loads on
// demand, so neither makes modules load each other at start-up.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

export type EdgeKind = 'value' | 'type' | 'dynamic';

export interface ImportEdge {
  /** Importing and imported file, relative to src/ with forward slashes (`engine/drive.ts`). */
  from: string;
  to: string;
  kind: EdgeKind;
  /** 1-based line of the import in `from`. */
  line: number;
}

/** Every module under `dir` (no tests, no declaration files). */
export function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (
      entry.name.endsWith('.ts') &&
      !entry.name.endsWith('.test.ts') &&
      !entry.name.endsWith('.d.ts')
    )
      out.push(path);
  }
  return out;
}

const posix = (path: string): string => path.split(sep).join('/');

function typeOnly(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isImportDeclaration(node)) {
    const clause = node.importClause;
    if (clause === undefined) return false; // `import './x.js'`: a side effect
    if (clause.isTypeOnly) return true;
    if (clause.name !== undefined) return false;
    const bindings = clause.namedBindings;
    if (bindings === undefined || ts.isNamespaceImport(bindings)) return false;
    return bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
  }
  if (node.isTypeOnly) return true;
  const clause = node.exportClause;
  if (clause === undefined || !ts.isNamedExports(clause)) return false;
  return clause.elements.length > 0 && clause.elements.every((e) => e.isTypeOnly);
}

/** Every relative import between the non-test files under `srcDir`. */
export function importGraph(srcDir: string): { files: string[]; edges: ImportEdge[] } {
  const files = sourceFiles(srcDir);
  const known = new Set(files);
  const edges: ImportEdge[] = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const add = (specifier: string, kind: EdgeKind, node: ts.Node): void => {
      if (!specifier.startsWith('.')) return;
      const target = resolve(dirname(file), specifier.replace(/\.js$/, '.ts'));
      if (!known.has(target)) return;
      edges.push({
        from: posix(relative(srcDir, file)),
        to: posix(relative(srcDir, target)),
        kind,
        line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1,
      });
    };
    const visit = (node: ts.Node): void => {
      if (
        (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
        node.moduleSpecifier !== undefined &&
        ts.isStringLiteral(node.moduleSpecifier)
      ) {
        add(node.moduleSpecifier.text, typeOnly(node) ? 'type' : 'value', node);
      } else if (
        ts.isCallExpression(node) &&
        node.expression.kind === ts.SyntaxKind.ImportKeyword &&
        node.arguments[0] !== undefined &&
        ts.isStringLiteralLike(node.arguments[0])
      ) {
        add(node.arguments[0].text, 'dynamic', node);
      } else if (ts.isImportTypeNode(node)) {
        const arg = node.argument;
        if (ts.isLiteralTypeNode(arg) && ts.isStringLiteral(arg.literal)) {
          add(arg.literal.text, 'type', node);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return { files: files.map((f) => posix(relative(srcDir, f))).sort(), edges };
}

/**
 * The cycles of a graph: one per strongly connected component of more than one file (or a file
 * importing itself), given as a path that starts and ends at the same file (`a.ts → b.ts → a.ts`),
 * the shortest cycle through the component's first file in sort order.
 */
export function importCycles(edges: readonly ImportEdge[]): string[][] {
  const next = new Map<string, Set<string>>();
  for (const e of edges) {
    if (!next.has(e.from)) next.set(e.from, new Set());
    next.get(e.from)!.add(e.to);
  }
  const nodes = [...new Set(edges.flatMap((e) => [e.from, e.to]))].sort();
  // Tarjan's strongly connected components.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of [...(next.get(v) ?? [])].sort()) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      components.push(component.sort());
    }
  };
  for (const v of nodes) if (!index.has(v)) connect(v);

  const cycles: string[][] = [];
  for (const component of components) {
    const start = component[0]!;
    const inside = new Set(component);
    if (component.length === 1 && !next.get(start)?.has(start)) continue;
    // Breadth-first from the start back to itself, staying inside the component.
    const previous = new Map<string, string>();
    const queue = [...(next.get(start) ?? [])].filter((w) => inside.has(w)).sort();
    for (const w of queue) previous.set(w, start);
    let found = queue.includes(start);
    while (!found && queue.length > 0) {
      const v = queue.shift()!;
      for (const w of [...(next.get(v) ?? [])].sort()) {
        if (!inside.has(w) || previous.has(w)) continue;
        previous.set(w, v);
        if (w === start) {
          found = true;
          break;
        }
        queue.push(w);
      }
    }
    const path = [start];
    for (let v = previous.get(start)!; v !== start; v = previous.get(v)!) path.unshift(v);
    path.unshift(start);
    cycles.push(path);
  }
  return cycles.sort((a, b) => a.join().localeCompare(b.join()));
}
