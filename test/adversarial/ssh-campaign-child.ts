// The process the SSH kill campaign kills: runs campaign actions one after another against the
// sshd fixture, over a SQLite ledger, until SIGKILL. Prints `ready` once, then one line per result.
import { readFileSync } from 'node:fs';
import { staticCredentials } from '../../src/engine/ports.js';
import { createRuntime } from '../../src/runtime.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/store.js';
import type { HostEntry } from '../../src/ssh/inventory.js';
import { CAMPAIGN_HOST, campaignActions } from './ssh-campaign-actions.js';

interface Args {
  ledger: string;
  root: string;
  entry: HostEntry;
  keyPath: string;
  trial: number;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const actions = campaignActions(args.root);
const runtime = createRuntime({
  ledger: openSqliteLedger(args.ledger),
  credentials: staticCredentials({}),
  ssh: {
    inventory: { [CAMPAIGN_HOST]: args.entry },
    resolveKey: () => Promise.resolve(readFileSync(args.keyPath)),
  },
  actions,
});
process.stdout.write('ready\n');
// Three streams at once, so one kill catches operations at different phases.
await Promise.all(
  [0, 1, 2].map(async (stream) => {
    for (let i = 0; i < 1000; i++) {
      const action = actions[(args.trial + stream + i) % actions.length]!;
      const env = await runtime.run(action, { job: `t${args.trial}-${stream}-${i}` });
      process.stdout.write(`op ${stream}.${i} ${env.category}\n`);
    }
  }),
);
