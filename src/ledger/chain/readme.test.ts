// The chain README is a contract: every verification code it documents is one `verify` can print,
// every code `verify` can print is documented, and its table of bundle damage says exactly the
// code and first bad seq that verification reports for that damage.
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { openMemoryLedger } from '../memory/store.js';
import { checkpointFor, encodeBundle, parseBundle, verifyBundle } from './bundle.js';
import { storedBytes } from './export.js';
import { generateKey, parseSignerKey } from './note.js';
import { VerifyCode } from './verify.js';

const readme = readFileSync(new URL('./README.md', import.meta.url), 'utf8');
const ORIGIN = 'candor.test/readme-log';
const key = generateKey(ORIGIN);
let valid = '';
const N = 4;

beforeAll(async () => {
  const ledger = openMemoryLedger();
  for (let i = 1; i <= N; i++)
    await ledger.append([
      {
        kind: 'gate_changed',
        at: 1_767_225_600_000 + i,
        session_id: null,
        operation_id: null,
        correlation_id: `c-${i}`,
        data: { locked: false, by: `operator-${i}` },
      },
    ]);
  const records = (await ledger.read()).map((r) => storedBytes(r));
  const signer = parseSignerKey(key.signerKey);
  if (!signer.ok) throw new Error(signer.failure);
  valid = encodeBundle({
    origin: ORIGIN,
    logKey: key.verifierKey,
    records,
    checkpoints: [checkpointFor(records, signer.value)],
  }).toString('utf8');
});

const lines = (): string[] => valid.trimEnd().split('\n');
const join = (ls: string[]): string => `${ls.join('\n')}\n`;
const trailer = (checkpoints: number, records: number): string =>
  `{"end":{"checkpoints":${checkpoints},"records":${records}}}`;

/** Each README row, by its first column, and how to make that damage. */
const DAMAGE: Record<string, () => string> = {
  'no trailer (the bundle was cut short)': () => join(lines().slice(0, -1)),
  'the trailer declares more records than present': () =>
    join([...lines().slice(0, -1), trailer(1, N + 2)]),
  'the trailer declares fewer records than present': () =>
    join([...lines().slice(0, -1), trailer(1, N - 1)]),
  'the trailer is damaged': () => join([...lines().slice(0, -1), '{"end":{"records":4}}']),
  'the trailer declares another number of checkpoints': () =>
    join([...lines().slice(0, -1), trailer(3, N)]),
  'the header is missing or damaged': () => join(['{"format":"nope"}', ...lines().slice(1)]),
  'a line after the trailer': () => join([...lines(), trailer(1, N)]),
};

/** The README's bundle-damage table: [damage, code, first_bad_seq as written]. */
function documentedRows(): [string, string, string][] {
  const at = readme.indexOf('| bundle damage');
  expect(at).toBeGreaterThan(0);
  return readme
    .slice(at)
    .split('\n')
    .slice(2)
    .filter((l) => l.startsWith('|'))
    .map((l) =>
      l
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim().replace(/`/g, '')),
    )
    .map(([damage, code, seq]) => [damage!, code!, seq!]);
}

describe('src/ledger/chain/README.md matches what verify prints', () => {
  it('documents every verification code, and only those', () => {
    const section = readme.slice(
      readme.indexOf('## Verification codes'),
      readme.indexOf('## What verification proves'),
    );
    const documented = new Set([...section.matchAll(/`([A-Z][A-Z_]+)`/g)].map((m) => m[1]));
    expect([...documented].sort()).toEqual(Object.values(VerifyCode).sort());
  });

  it('its bundle-damage table gives the code and first bad seq verify reports', () => {
    const rows = documentedRows();
    expect(rows.map((r) => r[0]).sort()).toEqual(Object.keys(DAMAGE).sort());
    expect(verifyBundle(parseBundle(Buffer.from(valid))).code).toBe('INTACT');
    for (const [damage, code, seq] of rows) {
      const report = verifyBundle(parseBundle(Buffer.from(DAMAGE[damage]!())), {
        logKeys: [key.verifierKey],
      });
      const expectedSeq =
        seq === 'null' ? null : seq === 'n + 1' ? N + 1 : seq === 'declared + 1' ? N : NaN;
      expect({ damage, code: report.code, seq: report.first_bad_seq }).toEqual({
        damage,
        code,
        seq: expectedSeq,
      });
    }
  });
});
