// The transport contract (test/transport.case.ts) over the scripted transport of `candor/testing`:
// what users test their actions with must keep the promises the real transports keep.
import { scriptedHttpTransport, type ScriptStep } from '../src/fakes/scripted-transport.js';
import type { HttpFound, HttpLookupPrepared, HttpPrepared } from '../src/core/transport.js';
import { transportContract, type CaseRequest } from './transport.case.js';

const json = (status: number, body: unknown): ScriptStep<HttpFound> => ({
  evidence: { phase: 'response_complete', status },
  reply: { status, body: Buffer.from(JSON.stringify(body)), framing: 'length' },
});

const script: Record<CaseRequest, ScriptStep<HttpFound>> = {
  answered: json(201, { id: 'r-1' }),
  failing: { evidence: { phase: 'not_sent', local_error: 'connect_refused' } },
  held: { hold: true },
  lookup_found: json(200, [{ id: 'r-1' }]),
  lookup_absent: json(404, { error: 'not_found' }),
  lookup_failed: json(503, { error: 'unavailable' }),
  lookup_held: { hold: true },
};

const request = (path: string): HttpPrepared => ({
  kind: 'http',
  id: 'att_1',
  origin: 'http://scripted.test',
  method: 'POST',
  path,
  headers: {},
  reuse_connection: false,
});
const lookup = (path: string): HttpLookupPrepared => ({
  ...request(path),
  method: 'GET',
  reuse_connection: true,
  max_body_bytes: 65_536,
  absent_on_404: true,
});

transportContract('scripted (candor/testing)', () => {
  const scripted = scriptedHttpTransport([]);
  return Promise.resolve({
    transport: scripted.transport,
    answered: request('/records'),
    failing: request('/records'),
    held: request('/records'),
    lookups: {
      found: lookup('/records/r-1'),
      absent: lookup('/records/r-2'),
      failed: lookup('/records/r-3'),
      held: lookup('/records/r-4'),
    },
    before: (which) => scripted.steps.push(script[which]),
    close: () => Promise.resolve(),
  });
});
