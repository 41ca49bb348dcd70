// Each transport's evidence codes are exactly its union in src/core/error-code.ts. The compiler
// refuses a code outside the union (the @ts-expect-error lines below fail `tsc` the day one of
// them compiles); this scan fails on what the compiler cannot see: a code written as a literal or
// cast instead of named from its transport's table, a code a transport never emits (a dead
// member), a transport naming another transport's code, or a literal passed off as reported.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  EngineErrorCode,
  HttpErrorCode,
  McpErrorCode,
  reportedCode,
  SshErrorCode,
  type EvidenceErrorCode,
} from '../src/core/error-code.js';
import type { Evidence } from '../src/core/evidence.js';
import { classify } from '../src/core/classify.js';

const SRC = join(import.meta.dirname, '..', 'src');

/** Each producer of evidence codes: its table and the folders (or files) that write its codes. */
const PRODUCERS = {
  HttpErrorCode: { table: HttpErrorCode, where: ['http'] },
  SshErrorCode: { table: SshErrorCode, where: ['ssh'] },
  McpErrorCode: { table: McpErrorCode, where: ['upstream'] },
  EngineErrorCode: { table: EngineErrorCode, where: ['engine'] },
  // Replays the evidence its script gives: no code of its own.
  ScriptedTransport: { table: {}, where: ['fakes/scripted-transport.ts'] },
} as const;
const TABLE_NAMES = ['HttpErrorCode', 'SshErrorCode', 'McpErrorCode', 'EngineErrorCode'];

function sourcesUnder(path: string): string[] {
  const full = join(SRC, path);
  if (path.endsWith('.ts')) return [full];
  return readdirSync(full, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile() && d.name.endsWith('.ts') && !d.name.includes('.test.'))
    .map((d) => join(d.parentPath, d.name));
}

/** Comments out, strings kept (a URL's `//` inside quotes is not a comment start). */
function stripComments(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\/|(^|[^:'"`\w])\/\/[^\n]*/g, (m, lead?: string) =>
    m.startsWith('/*') ? '' : (lead ?? ''),
  );
}

/** Codes written by hand: an `error_code`/`errorCode` field or a code helper given a literal. */
const LITERAL_CODE =
  /\b(?:error_code|errorCode)\s*[:=]\s*[`'"]|\bnotSent\(\s*[`'"]|\b(?:cut|stopWith)\([^(),]*,\s*[`'"]|\bas\s+(?:\w+ErrorCode|ReportedCode)\b/g;
/** `reportedCode` given a plain literal: a code of our own passed off as reported. */
const REPORTED_LITERAL = /\breportedCode\(\s*(?:'[^']*'|"[^"]*"|`[^`$]*`)\s*\)/g;

interface Scan {
  /** `Table.member` references, by table name. */
  members: Map<string, Set<string>>;
  literals: string[];
  reportedLiterals: string[];
}

function scan(where: readonly string[]): Scan {
  const members = new Map<string, Set<string>>();
  const literals: string[] = [];
  const reportedLiterals: string[] = [];
  for (const file of where.flatMap(sourcesUnder)) {
    const source = stripComments(readFileSync(file, 'utf8'));
    const at = relative(SRC, file);
    for (const m of source.matchAll(/\b(\w+ErrorCode)\.(\w+)\b/g)) {
      if (!TABLE_NAMES.includes(m[1]!)) continue;
      const set = members.get(m[1]!) ?? new Set<string>();
      set.add(m[2]!);
      members.set(m[1]!, set);
    }
    for (const m of source.matchAll(LITERAL_CODE)) literals.push(`${at}: ${m[0]}`);
    for (const m of source.matchAll(REPORTED_LITERAL)) reportedLiterals.push(`${at}: ${m[0]}`);
  }
  return { members, literals, reportedLiterals };
}

describe('evidence error codes, per transport', () => {
  for (const [name, { table, where }] of Object.entries(PRODUCERS)) {
    describe(name, () => {
      const found = scan(where);
      it('emits every code of its union, and names no other table', () => {
        const own = found.members.get(name) ?? new Set<string>();
        expect([...own].sort()).toEqual(Object.keys(table).sort());
        const others = [...found.members.keys()].filter((t) => t !== name);
        expect(others).toEqual([]);
      });
      it('writes no code as a literal or a cast, and passes no literal off as reported', () => {
        expect(found.literals).toEqual([]);
        expect(found.reportedLiterals).toEqual([]);
      });
    });
  }

  it('lists every wrapper call problem the SSH transport records (wrapper.ts)', () => {
    const wrapper = readFileSync(join(SRC, 'ssh', 'wrapper.ts'), 'utf8');
    const body = /function wrapperCallProblem\([\s\S]*?\n\}/.exec(wrapper)?.[0] ?? '';
    const problems = [...body.matchAll(/return '(\w+)'/g)].map((m) => m[1]!);
    expect(problems.length).toBeGreaterThan(0);
    const listed = Object.keys(SshErrorCode)
      .filter((k) => k.startsWith('invalid_request_'))
      .map((k) => k.slice('invalid_request_'.length));
    expect(problems.sort()).toEqual(listed.sort());
  });

  it('no two transports give one code two meanings', () => {
    const seen = new Map<string, string>();
    const clashes: string[] = [];
    for (const [name, { table }] of Object.entries(PRODUCERS)) {
      for (const value of Object.values(table) as string[]) {
        const earlier = seen.get(value);
        if (earlier !== undefined) clashes.push(`${value}: ${earlier} and ${name}`);
        seen.set(value, name);
      }
    }
    expect(clashes).toEqual([]);
  });

  it('reads any recorded code like a known one (older ledgers hold codes outside the unions)', () => {
    const recorded = { phase: 'request_sent', local_error: 'other', error_code: 'E_FROM_2025' };
    const known = { ...recorded, error_code: 'ECONNRESET' };
    // A code classify() has never seen reads like any other: it is a diagnostic, not a rule input.
    expect(classify(recorded, { action_class: 'create' })).toEqual(
      classify(known, { action_class: 'create' }),
    );
    expect(classify(recorded, { action_class: 'create' }).rule).not.toBe('unreadable_evidence');
  });
});

// Compile-time: `tsc` fails on an unused @ts-expect-error, so each line below proves a refusal.
export const compileChecks = (): EvidenceErrorCode[] => {
  const ssh: Evidence<SshErrorCode> = { phase: 'not_sent', error_code: SshErrorCode.marker_absent };
  const platform: string = 'ECONNRESET';
  const reported: Evidence<HttpErrorCode> = {
    phase: 'not_sent',
    error_code: reportedCode(platform),
  };
  // @ts-expect-error a code no union declares
  const unknown: Evidence = { phase: 'not_sent', error_code: 'made_up_code' };
  // @ts-expect-error a platform code written by hand is not a reported one
  const handWritten: Evidence<HttpErrorCode> = { phase: 'not_sent', error_code: 'ECONNRESET' };
  // @ts-expect-error the SSH transport's code in HTTP evidence
  const crossed: Evidence<HttpErrorCode> = { phase: 'not_sent', error_code: 'marker_absent' };
  // @ts-expect-error an upstream's code in SSH evidence
  const crossed2: Evidence<SshErrorCode> = { phase: 'not_sent', error_code: 'no_answer' };
  return [ssh, reported, unknown, handWritten, crossed, crossed2].flatMap((e) =>
    e.error_code === undefined ? [] : [e.error_code],
  );
};
