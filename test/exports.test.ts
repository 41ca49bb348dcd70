// The public surface of every package.json subpath (`candor`, `candor/mcp`, `candor/testing`, …)
// is pinned in exports.snapshot.txt: each exported name with its kind (function, class, object,
// value, or type for names that exist only for the compiler). A name added, removed or changed in
// kind fails here with a line-by-line diff. Such a change is a decision about the public API:
// review it, then record it with `npx vitest run test/exports.test.ts -u`.
//
// Each subpath is read from the TypeScript source its `dist/` target is built from: values from
// the loaded module (what a program gets at run time), types from the entry file's `export`
// statements (under verbatimModuleSyntax a type is re-exported only with `type`, so the syntax
// says which names are types; `export *` is refused, an entry lists its names).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

type Kind = 'function' | 'class' | 'object' | 'value' | 'type';

interface PackageJson {
  name: string;
  exports: Record<string, string | { types?: string; default?: string }>;
}

/** Each code subpath of package.json with the source file its `default` target is built from. */
function subpaths(): Array<{ name: string; source: string }> {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as PackageJson;
  const out: Array<{ name: string; source: string }> = [];
  for (const [key, target] of Object.entries(pkg.exports)) {
    const file = typeof target === 'string' ? target : target.default;
    if (file === undefined || !file.endsWith('.js')) continue; // ./package.json
    const match = /^\.\/dist\/(.+)\.js$/.exec(file);
    if (match === null) throw new Error(`package.json exports["${key}"]: ${file} is not in dist/`);
    const name = key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`;
    out.push({ name, source: join(root, 'src', `${match[1]}.ts`) });
  }
  return out;
}

/** Every name an entry file exports, and whether the syntax makes it a type. */
function declaredExports(file: string): Map<string, boolean> {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const names = new Map<string, boolean>();
  const exported = (node: ts.Node): boolean =>
    ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  for (const node of source.statements) {
    if (ts.isExportDeclaration(node)) {
      const clause = node.exportClause;
      if (clause === undefined || !ts.isNamedExports(clause))
        throw new Error(`${file}: \`export *\` in a package entry; name the exports`);
      for (const e of clause.elements) names.set(e.name.text, node.isTypeOnly || e.isTypeOnly);
    } else if (ts.isExportAssignment(node)) {
      names.set('default', false);
    } else if (!exported(node)) {
      continue;
    } else if (ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) {
      names.set(node.name.text, true);
    } else if (ts.isVariableStatement(node)) {
      for (const d of node.declarationList.declarations)
        if (ts.isIdentifier(d.name)) names.set(d.name.text, false);
    } else if (
      (ts.isFunctionDeclaration(node) ||
        ts.isClassDeclaration(node) ||
        ts.isEnumDeclaration(node)) &&
      node.name !== undefined
    ) {
      names.set(node.name.text, false);
    }
  }
  return names;
}

function kindOf(value: unknown): Kind {
  if (typeof value === 'function')
    return /^class[\s{]/.test(Function.prototype.toString.call(value)) ? 'class' : 'function';
  if (typeof value === 'object' && value !== null) return 'object';
  return 'value';
}

async function surface(source: string): Promise<Array<[string, Kind]>> {
  const mod = (await import(source)) as Record<string, unknown>;
  const declared = declaredExports(source);
  const rows = new Map<string, Kind>();
  for (const [name, value] of Object.entries(mod)) rows.set(name, kindOf(value));
  for (const [name, isType] of declared) {
    if (isType) {
      expect(rows.has(name), `${source}: type ${name} is also a run-time export`).toBe(false);
      rows.set(name, 'type');
    } else {
      expect(rows.has(name), `${source}: ${name} is declared but not exported at run time`).toBe(
        true,
      );
    }
  }
  return [...rows].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

const HEADER = [
  '# The public surface of every package.json subpath: name and kind (test/exports.test.ts).',
  '# A change here changes the public API: review it, then `npx vitest run test/exports.test.ts -u`.',
];

describe('package exports', () => {
  it('every subpath exports exactly the names in exports.snapshot.txt', async () => {
    const entries = subpaths();
    // The subpaths the README and docs name are all there.
    expect(entries.map((e) => e.name)).toEqual(
      expect.arrayContaining(['candor', 'candor/mcp', 'candor/testing']),
    );
    const lines = [...HEADER];
    for (const { name, source } of entries) {
      lines.push('', name);
      for (const [exported, kind] of await surface(source))
        lines.push(`  ${exported.padEnd(32)} ${kind}`);
    }
    await expect(`${lines.join('\n')}\n`).toMatchFileSnapshot('./exports.snapshot.txt');
  });

  it('candor/mcp keeps the gateway internals and the config ComposeOptions out', async () => {
    const mcp = subpaths().find((e) => e.name === 'candor/mcp')!;
    const names = (await surface(mcp.source)).map(([n]) => n);
    expect(names).toEqual(
      expect.arrayContaining(['createGateway', 'composeGateway', 'startGateway', 'serveHttp']),
    );
    for (const internal of [
      'ComposeOptions',
      'currentCall',
      'headline',
      'resultOf',
      'originAllowed',
      'actionTool',
      'annotationsFor',
      'builtinTools',
      'BUILTIN',
      'outputSchema',
      'titleOf',
    ]) {
      expect(names, `${internal} is internal to the gateway`).not.toContain(internal);
    }
  });
});
