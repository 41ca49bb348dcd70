// No import cycles in src/ (issue 32): two modules that import each other cannot be read, tested
// or moved one at a time. Every kind of import counts — run-time imports, type-only imports
// (`import type`, erased by the compiler, yet the two files still cannot be understood apart) and
// `import()` (loaded on demand, yet a circle all the same). A cycle is printed file by file with
// the line of each import, so it can be broken where it is cheapest.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importCycles, importGraph, type ImportEdge } from './support/import-graph.js';

const src = join(fileURLToPath(new URL('..', import.meta.url)), 'src');

/** `a.ts:12 → b.ts:3 → a.ts` with the line of each import. */
function describeCycle(cycle: readonly string[], edges: readonly ImportEdge[]): string {
  const steps = cycle.slice(0, -1).map((from, i) => {
    const to = cycle[i + 1]!;
    const edge = edges.find((e) => e.from === from && e.to === to)!;
    return `${from}:${edge.line} (${edge.kind}) →`;
  });
  return `${steps.join(' ')} ${cycle[cycle.length - 1]}`;
}

describe('import cycles in src/', () => {
  it('finds none, counting run-time, type-only and dynamic imports', () => {
    const { files, edges } = importGraph(src);
    // The graph is the real one: the engine's files are there with their imports of all kinds.
    expect(files).toContain('engine/reconcile.ts');
    expect(edges).toContainEqual(
      expect.objectContaining({
        from: 'engine/reconcile-records.ts',
        to: 'engine/drive.ts',
        kind: 'value',
      }),
    );
    expect(edges).toContainEqual(
      expect.objectContaining({
        from: 'engine/ownership.ts',
        to: 'engine/context.ts',
        kind: 'type',
      }),
    );
    expect(edges).toContainEqual(
      expect.objectContaining({
        from: 'ledger/open.ts',
        to: 'ledger/sqlite/store.ts',
        kind: 'dynamic',
      }),
    );
    const cycles = importCycles(edges).map((c) => describeCycle(c, edges));
    expect(cycles, `import cycles:\n${cycles.join('\n')}`).toEqual([]);
  });

  it('reports a cycle of any kind, with each import line', () => {
    const edge = (
      from: string,
      to: string,
      kind: ImportEdge['kind'],
      line: number,
    ): ImportEdge => ({
      from,
      to,
      kind,
      line,
    });
    const edges = [
      edge('a.ts', 'b.ts', 'value', 3),
      edge('b.ts', 'c.ts', 'dynamic', 7),
      edge('c.ts', 'a.ts', 'type', 1),
      edge('c.ts', 'd.ts', 'value', 2),
      edge('d.ts', 'd.ts', 'value', 9),
      edge('e.ts', 'a.ts', 'value', 4),
    ];
    const cycles = importCycles(edges);
    expect(cycles).toEqual([
      ['a.ts', 'b.ts', 'c.ts', 'a.ts'],
      ['d.ts', 'd.ts'],
    ]);
    expect(describeCycle(cycles[0]!, edges)).toBe(
      'a.ts:3 (value) → b.ts:7 (dynamic) → c.ts:1 (type) → a.ts',
    );
    // A chain without a way back is no cycle.
    expect(
      importCycles([edge('a.ts', 'b.ts', 'value', 1), edge('b.ts', 'c.ts', 'type', 1)]),
    ).toEqual([]);
  });
});
