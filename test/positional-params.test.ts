// No engine function with more than four positional parameters (issue 32). A long positional list
// is read by counting commas, and a call like `gateRefusal(a, b, undefined, c, …)` hides which
// argument is which; past four, the trailing or optional ones belong in one named options object
// with a typed interface. Every function counts — declarations, methods, constructors, arrow
// functions and function expressions — a rest parameter counts as one, and the parameters of a
// function *type* (a port's signature, a callback type) do not, since they describe someone else's
// function. Each offender is printed as `file:line name(n params)`.
import { readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { sourceFiles } from './support/import-graph.js';

const MAX_POSITIONAL = 4;

const src = join(fileURLToPath(new URL('..', import.meta.url)), 'src');
const engine = join(src, 'engine');

type FunctionNode =
  | ts.FunctionDeclaration
  | ts.MethodDeclaration
  | ts.ConstructorDeclaration
  | ts.ArrowFunction
  | ts.FunctionExpression;

function isFunctionNode(node: ts.Node): node is FunctionNode {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node)
  );
}

/** The name a reader would search for: the declared name, or what an anonymous function is bound to. */
function functionName(node: FunctionNode, file: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  if (node.name) return node.name.getText(file);
  const parent = node.parent;
  if (
    (ts.isVariableDeclaration(parent) ||
      ts.isPropertyAssignment(parent) ||
      ts.isPropertyDeclaration(parent)) &&
    parent.name
  )
    return parent.name.getText(file);
  return '<anonymous>';
}

/** `file:line name(n params)` for every function in `text` with more than `max` parameters. */
export function longParameterLists(path: string, text: string, max: number): string[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    // `this: T` is a type annotation, not an argument anyone passes.
    if (isFunctionNode(node)) {
      const params = node.parameters.filter((p) => p.name.getText(file) !== 'this').length;
      if (params > max) {
        const { line } = file.getLineAndCharacterOfPosition(node.getStart(file));
        out.push(`${path}:${line + 1} ${functionName(node, file)}(${params} params)`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return out;
}

describe('positional parameters in src/engine/', () => {
  it(`finds no function with more than ${MAX_POSITIONAL}`, () => {
    const files = sourceFiles(engine);
    // The scan reads the real engine: its driver is there.
    expect(files.map((f) => relative(src, f).split(sep).join('/'))).toContain('engine/drive.ts');
    const offenders = files.flatMap((f) =>
      longParameterLists(
        relative(src, f).split(sep).join('/'),
        readFileSync(f, 'utf8'),
        MAX_POSITIONAL,
      ),
    );
    expect(
      offenders,
      `functions with more than ${MAX_POSITIONAL} positional parameters (use an options object):\n${offenders.join('\n')}`,
    ).toEqual([]);
  });

  it('counts every kind of function, a rest parameter as one, and no function type', () => {
    const text = [
      'export function five(a: number, b: number, c: number, d: number, e: number) {}',
      'export function four(a: number, b: number, c: number, d: number) {}',
      'export function rest(a: number, b: number, c: number, d: number, ...e: number[]) {}',
      'export function restOnly(a: number, b: number, c: number, ...d: number[]) {}',
      'export function withThis(this: unknown, a: number, b: number, c: number, d: number) {}',
      'export const arrow = (a: 1, b: 2, c: 3, d: 4, e: 5) => a;',
      'export const expr = function (a: 1, b: 2, c: 3, d: 4, e: 5) { return a; };',
      'export class K {',
      '  constructor(a: 1, b: 2, c: 3, d: 4, e: 5) {}',
      '  method(a: 1, b: 2, c: 3, d: 4, e: 5) {}',
      '}',
      'export const table = { entry: (a: 1, b: 2, c: 3, d: 4, e: 5) => a };',
      'export type Fn = (a: 1, b: 2, c: 3, d: 4, e: 5) => void;',
      'export interface Port { call(a: 1, b: 2, c: 3, d: 4, e: 5): void }',
      'export function outer(cb: (a: 1, b: 2, c: 3, d: 4, e: 5) => void) {}',
      'export const nested = () => [1].map((a, b, c, d, e) => a);',
    ].join('\n');
    expect(longParameterLists('x.ts', text, MAX_POSITIONAL)).toEqual([
      'x.ts:1 five(5 params)',
      'x.ts:3 rest(5 params)',
      'x.ts:6 arrow(5 params)',
      'x.ts:7 expr(5 params)',
      'x.ts:9 constructor(5 params)',
      'x.ts:10 method(5 params)',
      'x.ts:12 entry(5 params)',
      'x.ts:16 <anonymous>(5 params)',
    ]);
  });
});
