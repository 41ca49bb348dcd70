// The retry directive an agent sees comes from one place: the rule table (src/core/rule-table.ts),
// which classify() and the engine's refusals, holds and operation fold read. This scan fails on a
// directive set by hand anywhere else in src/: a Retry member, a retry field or variable set to a
// literal of the Retry vocabulary (also inside a ternary), or unknownOutcome() given a directive.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Retry, valuesOf } from '../src/core/vocabulary.js';

const SRC = join(import.meta.dirname, '..', 'src');

/** The tables themselves (the rule table, the per-class table it reads) and the vocabulary. */
const TABLE_FILES = new Set(['core/rule-table.ts', 'core/rules.ts', 'core/vocabulary.ts']);

const DIRECTIVES = valuesOf(Retry).join('|');
const RETRY_MEMBER = new RegExp(`\\bRetry\\.(${DIRECTIVES})\\b`, 'g');
// A field, variable or parameter whose name holds "retry", set (`=` or `:`) to an expression;
// the expression runs to the next `;`, `,` or `}` (a ternary's branches included).
const RETRY_SET = /\b\w*retry\w*\s*(?::\s*[A-Za-z_.]+\s*)?(?:=(?![=>])|:(?!:))\s*([^;,}]*)/gi;
const DIRECTIVE_LITERAL = new RegExp(`(^|[^=!]=?\\s*)(['"])(${DIRECTIVES})\\2`, 'g');
const UNKNOWN_OUTCOME_LITERAL = new RegExp(`\\bunknownOutcome\\(\\s*['"](${DIRECTIVES})['"]`, 'g');

/** Comments out, strings kept (a URL's `//` inside quotes is not a comment start). */
function stripComments(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\/|(^|[^:'"`\w])\/\/[^\n]*/g, (m, lead?: string) =>
    m.startsWith('/*') ? '' : (lead ?? ''),
  );
}

const compared = (before: string): boolean => /[!=]==?$/.test(before.trimEnd());

/** Whether an expression yields a directive literal (not one it only compares against). */
function setsDirective(expression: string): boolean {
  for (const m of expression.matchAll(DIRECTIVE_LITERAL))
    if (!compared(expression.slice(0, m.index + m[1]!.length))) return true;
  return false;
}

interface Finding {
  kind: 'retry_member' | 'retry_set' | 'unknown_outcome_directive';
  text: string;
}

/** The hand-set directives in one file's source. */
function handSetRetries(source: string): Finding[] {
  const code = stripComments(source);
  const found: Finding[] = [];
  for (const m of code.matchAll(RETRY_MEMBER))
    if (!compared(code.slice(0, m.index))) found.push({ kind: 'retry_member', text: m[0] });
  for (const m of code.matchAll(RETRY_SET))
    if (setsDirective(m[1]!)) found.push({ kind: 'retry_set', text: m[0].trim() });
  for (const m of code.matchAll(UNKNOWN_OUTCOME_LITERAL))
    found.push({ kind: 'unknown_outcome_directive', text: m[0] });
  return found;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.ts$/.test(e.name) && !/\.(test|case)\.ts$/.test(e.name) ? [path] : [];
  });
}

describe('retry directives come from the rule table', () => {
  it('no file in src/ sets one by hand outside the table', () => {
    const offenders: Record<string, string[]> = {};
    for (const path of sourceFiles(SRC)) {
      const file = relative(SRC, path).split('\\').join('/');
      if (TABLE_FILES.has(file)) continue;
      for (const f of handSetRetries(readFileSync(path, 'utf8')))
        (offenders[file] ??= []).push(f.text);
    }
    expect(offenders).toEqual({});
  });

  it('has teeth: each way of setting a directive by hand is found', () => {
    const planted = [
      `return { category: 'gate_locked', retry: 'escalate', remote_effect: 'none' };`,
      `const retry: Retry = !allNone && lookup ? 'reconcile_first' : 'escalate';`,
      `const retryNext =\n  effect === 'none'\n    ? c.retry\n    : lookup\n      ? 'reconcile_first'\n      : 'escalate';`,
      `outcome: { ...c, retry: once ? 'never' : 'escalate' },`,
      `retry: 'reconcile_first' as const,`,
      `const r = { retry: Retry.never };`,
      `outcome: unknownOutcome('escalate'),`,
    ];
    for (const snippet of planted) expect(handSetRetries(snippet), snippet).not.toEqual([]);
  });

  it('leaves reads, comparisons, types and table lookups alone', () => {
    const fine = [
      `if (c.retry === 'after_delay' && c.retry_after_ms !== null) x();`,
      `return { ...claim, retry: retryOf('owner_holds'), retry_after_ms: null };`,
      `retry: finish.retry,`,
      `interface A { retry: Retry; licence: Licence | null; retry_reason?: string }`,
      `const ok = directive.retry === 'escalate' ? 'a person' : 'a lookup';`,
      `if (e.retry !== Retry.after_delay || e.retry_after_ms !== undefined) y();`,
      `// retry: 'escalate' in a comment says why, it sets nothing`,
      `const url = 'http://x/retry'; retry_after_ms: 0,`,
    ];
    for (const snippet of fine) expect(handSetRetries(snippet), snippet).toEqual([]);
  });
});
