// candor demo: the main job. Starts the fake service, runs the reference matrix through the real
// runtime with its own embedded SQLite ledger (./.candor/demo.db, apart from any gateway's ledger;
// --reset starts it fresh), prints the table and one summary line, then how to look at it with
// the command this user has (`candor …` when installed, `node …/bin/candor.js …` otherwise).
// It also writes .candor/demo.yaml naming that ledger, so every command the web view and these
// lines print (`ops`, `ui`, `recover`, `audit` with `--config .candor/demo.yaml`) runs as printed.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openLedger } from '../../ledger/open.js';
import { shellWord } from '../../core/shell.js';
import { CliUsageError, parseFlags, type CommandIo } from '../io.js';
import { cliCommand } from '../invocation.js';
import { packageRoot } from '../version.js';
import { runFile } from './matrix.js';

export const DEMO_LEDGER_FILE = '.candor/demo.db';
export const DEMO_CONFIG_FILE = '.candor/demo.yaml';

/**
 * The demo's candor.yaml: its ledger and its HTTP actions as the reference matrix declares them
 * (src/matrix/reference-actions.ts), so `recover` finds each operation's action by name. Their
 * fake service lived only for the run and its records went with it, so the destination is an
 * origin that can never answer (`.invalid`, RFC 6761): a lookup fails and proves nothing, a first
 * attempt is not sent, and nothing can be claimed absent that may have existed. The SSH rows'
 * actions are not declared (recover says so for each).
 */
const DEMO_CONFIG = `# Written by \`candor demo\` (again on every run): the demo's ledger and actions, for the
# commands it prints (\`ops\`, \`ui\`, \`recover\`, \`audit\` with --config .candor/demo.yaml).
# The actions ran against a fake service that lived only during the run; the origin below can never
# answer, so \`recover\` looks nothing up and sends nothing: it says for each unresolved operation
# that it needs a person, and why. Paths are relative to this file's folder.
version: 1
ledger: sqlite:./demo.db
destinations:
  reference: { origin: 'http://demo-fake.invalid' }
  reference-keyed:
    origin: 'http://demo-fake.invalid'
    idempotency: { header: Idempotency-Key, honoured: true, retention_ms: 86400000 }
  reference-payments:
    origin: 'http://demo-fake.invalid'
    idempotency: { header: Idempotency-Key, honoured: true, retention_ms: 86400000 }
    five_xx: not_applied
  reference-builds:
    origin: 'http://demo-fake.invalid'
    idempotency: { header: Idempotency-Key, honoured: false, retention_ms: 86400000 }
actions:
${[
  [
    'create_deployment',
    'create',
    'the deployment',
    'reference',
    'POST /v1/deployments',
    'deployments',
  ],
  ['create_release', 'create', 'the release', 'reference-keyed', 'POST /v1/releases', 'releases'],
  ['create_issue', 'create', 'the issue', 'reference', 'POST /v1/issues', 'issues'],
  ['create_ticket', 'create', 'the ticket', 'reference', 'POST /v1/issues', null],
  ['create_build', 'create', 'the build', 'reference-builds', 'POST /v1/builds', 'builds'],
  [
    'create_payment',
    'financial',
    'the payment',
    'reference-payments',
    'POST /v1/payments',
    'payments',
  ],
  [
    'grant_permission',
    'permission_change',
    'the permission grant',
    'reference-keyed',
    'POST /v1/permissions',
    'permissions',
  ],
  [
    'update_record',
    'set_state',
    'the record update',
    'reference',
    'PATCH /v1/records/{{input.id}}',
    null,
  ],
  [
    'delete_release',
    'destructive',
    'the release deletion',
    'reference',
    'DELETE /v1/releases/{{input.id}}',
    null,
  ],
  [
    'add_note',
    'append',
    'the note',
    'reference',
    'POST /v1/records/{{input.record_id}}/notes',
    null,
  ],
  ['read_issue', 'read', 'the issue lookup', 'reference', 'GET /v1/issues/{{input.id}}', null],
  ['read_build', 'read', 'the build lookup', 'reference', 'GET /v1/builds/{{input.id}}', null],
  ['list_deployments', 'read', 'the deployment list', 'reference', 'GET /v1/deployments', null],
]
  .map(([name, cls, subject, destination, route, kind]) => {
    const [method, path] = (route as string).split(' ');
    return [
      `  - name: ${name}`,
      `    class: ${cls}`,
      `    subject: ${subject}`,
      `    description: The demo's ${name} (reference matrix).`,
      `    destination: ${destination}`,
      `    request: { method: ${method}, path: '${path}' }`,
      `    input: { type: object, properties: {${[...(path ?? '').matchAll(/\{\{input\.(\w+)\}\}/g)].map((m) => ` ${m[1]}: { type: string }`).join(',')} } }`,
      ...(kind ? [`    reconcile: { path: '/v1/${kind}?client_ref={{correlation_id}}' }`] : []),
    ].join('\n');
  })
  .join('\n')}
`;

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    ledger: 'string',
    quiet: 'boolean',
    serial: 'boolean',
    concurrency: 'string',
    reset: 'boolean',
    json: 'string',
  });
  if (positional.length > 0) throw new CliUsageError(`unexpected argument "${positional[0]}"`);
  if (flags.reset === true && typeof flags.ledger === 'string')
    throw new CliUsageError(
      `--reset starts the demo's own ledger (${DEMO_LEDGER_FILE}) fresh; it does not apply to --ledger`,
    );
  const file = join(packageRoot(), 'examples', 'matrix', 'reference.yaml');
  const own = typeof flags.ledger !== 'string';
  const ledger = own ? `sqlite:./${DEMO_LEDGER_FILE}` : (flags.ledger as string);
  if (flags.reset === true)
    for (const suffix of ['', '-wal', '-shm', '-journal'])
      await rm(`${DEMO_LEDGER_FILE}${suffix}`, { force: true });
  if (own) {
    await mkdir('.candor', { recursive: true });
    await writeFile(DEMO_CONFIG_FILE, DEMO_CONFIG);
  }
  const code = await runFile(
    [
      file,
      '--ledger',
      ledger,
      ...(flags.quiet ? ['--quiet'] : []),
      ...(flags.serial ? ['--serial'] : []),
      ...(typeof flags.concurrency === 'string' ? ['--concurrency', flags.concurrency] : []),
      ...(typeof flags.json === 'string' ? ['--json', flags.json] : []),
    ],
    io,
    'candor demo: the reference failure matrix through the real engine\n',
  );
  const cli = cliCommand();
  const select = own ? `--config ${DEMO_CONFIG_FILE}` : `--ledger ${shellWord(ledger)}`;
  const example = await unresolvedExample(ledger);
  const matrix = typeof flags.json === 'string' ? ` --matrix ${shellWord(flags.json)}` : '';
  io.out(
    [
      '',
      'Inspect what happened:',
      `  ${cli} ops list ${select} --state unknown,open   # operations a person or a lookup must settle`,
      ...(example
        ? [
            `  ${cli} ops show ${example} ${select}   # one operation: intent, attempts, observations`,
          ]
        : []),
      '',
      'See it in the browser (timelines, sessions, audit; read-only, 127.0.0.1):',
      `  ${cli} ui ${select}${matrix}`,
      ...(own && flags.reset !== true
        ? ['', `Each run adds to this ledger; start it fresh with: ${cli} demo --reset`]
        : []),
      '',
    ].join('\n'),
  );
  return code;
}

/** An unresolved operation of the run (else any), so the printed `ops show` names a real one. */
async function unresolvedExample(url: string): Promise<string | null> {
  const opened = await openLedger(url, { mustExist: true });
  if (!opened.ok) return null;
  try {
    const open = await opened.value.operations({ states: ['unknown', 'open'], limit: 1 });
    const any = open.rows.length > 0 ? open : await opened.value.operations({ limit: 1 });
    return any.rows[0]?.operation_id ?? null;
  } finally {
    await opened.value.close();
  }
}
