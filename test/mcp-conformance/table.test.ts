// The compatibility table in docs/mcp-clients.md is the rendering of the suite's recorded results, never prose.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { README_BEGIN, README_END, RESULTS_FILE, renderTable, type ResultRow } from './table.js';

describe('docs/mcp-clients.md compatibility table', () => {
  it('equals the table rendered from test/mcp-conformance/results.json', () => {
    const rows = JSON.parse(readFileSync(RESULTS_FILE, 'utf8')) as ResultRow[];
    const readme = readFileSync(new URL('../../docs/mcp-clients.md', import.meta.url), 'utf8');
    const start = readme.indexOf(README_BEGIN);
    const end = readme.indexOf(README_END);
    expect(start).toBeGreaterThan(0);
    // Prettier pads the README's table; compare cell by cell.
    const cells = (md: string) =>
      md
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) =>
          l
            .split('|')
            .map((c) => c.trim().replace(/^-+$/, '---'))
            .join('|'),
        );
    expect(cells(readme.slice(start, end + README_END.length))).toEqual(cells(renderTable(rows)));
    // Every row of the suite is there, and a failing check would show as NO.
    expect(rows.length).toBeGreaterThanOrEqual(10);
    expect(
      renderTable([{ client: 'x', transport: 'http', version: null, checks: { list: 'fail' } }]),
    ).toContain('| x | http | — | NO | — |');
  });
});
