// The actions of the SSH kill campaign, shared by the child that gets killed and the parent that
// recovers: two marker families and one converging family. Each job counts its executions in
// `<root>/<job>/count` on this machine (sshd runs here).
import { join } from 'node:path';
import { z } from 'zod';
import type { EngineAction } from '../../src/engine/action.js';
import { defineSshAction } from '../../src/engine/ssh-action.js';
import { shQuote } from '../../src/ssh/wrapper.js';

export const CAMPAIGN_HOST = 'box';
const input = z.object({ job: z.string().regex(/^[a-z0-9-]{1,60}$/) });

function job(root: string, name: string): string {
  return [
    `d=${shQuote(join(root, name))}`,
    'mkdir -p "$d"',
    'echo run >>"$d/count"',
    'sleep 0.05',
    'touch "$d/state"',
  ].join('; ');
}

export function campaignActions(root: string): EngineAction[] {
  const common = { subject: 'the job', input, host_ref: CAMPAIGN_HOST, deadline_ms: 60_000 };
  return [
    defineSshAction({
      ...common,
      name: 'camp_execute',
      class: 'execute',
      command: (i) => job(root, i.job),
    }),
    defineSshAction({
      ...common,
      name: 'camp_pay',
      class: 'financial',
      command: (i) => job(root, i.job),
    }),
    defineSshAction({
      ...common,
      name: 'camp_converge',
      class: 'set_state',
      command: (i) => job(root, i.job),
      check: (i) => `test -f ${shQuote(join(root, i.job, 'state'))}`,
    }),
  ] as EngineAction[];
}
