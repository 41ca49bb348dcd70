// `candor serve` refuses to start on a broken policy file (one line, FILE:LINE:COL, exit 2), and
// `candor policy check | test` give their verdicts. Runs the compiled CLI (dist/, built by the
// global setup) as a user would.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './fixtures/mcp/stdio.js';

const BIN = join(ROOT, 'bin', 'candor.js');

function setup(policy: string): { dir: string; config: string } {
  const dir = mkdtempSync(join(tmpdir(), 'candor-policy-cli-'));
  mkdirSync(join(dir, 'policies'));
  writeFileSync(join(dir, 'policies', 'pay.cedar'), policy);
  const config = join(dir, 'candor.yaml');
  writeFileSync(
    config,
    `ledger: 'memory:'
destinations:
  payments: { origin: 'http://127.0.0.1:9', route_prefix: /v1/payments }
actions:
  - name: create_payment
    class: create
    subject: the payment
    description: Pay.
    destination: payments
    request: { method: POST, path: /v1/payments, body: { amount: '{{input.amount}}' } }
    input: { type: object, properties: { amount: { type: integer } }, required: [amount] }
policy:
  files: [policies/pay.cedar]
  totals:
    spent_today: { argument: amount, actions: [create_payment], window: day }
`,
  );
  return { dir, config };
}

const candor = (args: string[], cwd: string) =>
  spawnSync(process.execPath, [BIN, ...args], { cwd, encoding: 'utf8', input: '' });

const GOOD = `permit (principal, action, resource);

@id("over-500")
forbid (principal, action == Candor::Action::"create_payment", resource)
when { context.args.amount > 500 };
`;

describe('a broken policy file', () => {
  it('stops serve with one line naming FILE:LINE:COL, exit 2, nothing served', () => {
    const { dir, config } = setup(
      'permit (principal, action, resource);\n\nforbid (principal, action, resource)\nwhen { context.args.amount > };\n',
    );
    const r = candor(['serve', '--config', config], dir);
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/policies\/pay\.cedar:4:\d+: /);
    expect(r.stderr).not.toMatch(/\bat .*\.js:\d+/);
    expect(r.stdout).toBe('');
  });

  it('a typo in an attribute name stops serve too, at its place', () => {
    const { dir, config } = setup(GOOD.replace('args.amount', 'args.amonut'));
    const r = candor(['serve', '--config', config], dir);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/policies\/pay\.cedar:5:8: .*amonut.*did you mean `amount`/);
  });
});

describe('candor policy', () => {
  it('check: valid policies exit 0; a typo is an error with FILE:LINE:COL, exit 1', () => {
    const good = setup(GOOD);
    const ok = candor(['policy', 'check', '--config', good.config], good.dir);
    expect(ok.status).toBe(0);
    expect(ok.stdout).toContain('2 policies in 1 file(s)');
    const bad = setup(GOOD.replace('args.amount', 'args.amonut'));
    const r = candor(['policy', 'check', '--config', bad.config], bad.dir);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/pay\.cedar:5:8: .*amonut/);
  });

  it('test: expected decisions pass (exit 0); a mismatch fails (exit 1) naming the case', () => {
    const { dir, config } = setup(GOOD);
    const cases = (expectBig: string) => `cases:
  - name: small payment
    action: create_payment
    args: { amount: 100 }
    expect: allow
  - name: big payment
    action: create_payment
    args: { amount: 900 }
    totals: { spent_today: { count: 1, sum: 100 } }
    expect: ${expectBig}
`;
    writeFileSync(join(dir, 'ok.yaml'), cases('deny\n    policies: [over-500]'));
    const ok = candor(['policy', 'test', join(dir, 'ok.yaml'), '--config', config], dir);
    expect(ok.stdout).toContain('2 of 2 cases as expected');
    expect(ok.status).toBe(0);
    writeFileSync(join(dir, 'bad.yaml'), cases('allow'));
    const bad = candor(['policy', 'test', join(dir, 'bad.yaml'), '--config', config], dir);
    expect(bad.status).toBe(1);
    expect(bad.stdout).toMatch(/FAIL {2}big payment: expected allow, got deny by over-500/);
  });

  it('schema prints the Cedar schema generated from the actions', () => {
    const { dir, config } = setup(GOOD);
    const r = candor(['policy', 'schema', '--config', config], dir);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('action "create_payment" appliesTo');
    expect(r.stdout).toMatch(/amount: __cedar::Long/);
    expect(r.stdout).toMatch(/spent_today: \{/);
  });
});
