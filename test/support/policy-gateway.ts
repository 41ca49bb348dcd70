// A gateway with a `policy:` section in front of the fake service, served in-process to an MCP SDK
// client (the HTTP side is real sockets: the engine's requests reach the fake over loopback).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { loadConfig } from '../../src/config/load.js';
import type { Envelope } from '../../src/core/envelope.js';
import { openMemoryLedger } from '../../src/ledger/memory/store.js';
import { composeGateway } from '../../src/mcp/start.js';

export const PAY_TOKEN_VAR = 'CANDOR_TEST_PAY_TOKEN';
export const PAY_TOKEN = 'tok-candor-policy-4b1e9d';

export interface PolicyYamlOptions {
  origin: string;
  /** The `policy:` section body (YAML, indented two spaces). */
  policy: string;
  /** The key is honoured (a retry after an unknown outcome is licensed). */
  honoured?: boolean;
  approvals?: boolean;
  deadlineMs?: number;
}

export function policyConfigYaml(o: PolicyYamlOptions): string {
  return `ledger: 'memory:'
credentials:
  fake: { ref: env:${PAY_TOKEN_VAR}, scheme: Bearer }
destinations:
  payments:
    origin: ${o.origin}
    credential: fake
    route_prefix: /v1/payments
    idempotency: { header: Idempotency-Key, honoured: ${o.honoured ? 'true' : 'false'}, retention_ms: 86400000 }
actions:
  - name: create_payment
    class: create
    subject: the payment
    description: Pay an amount in EUR.
    destination: payments
    request:
      method: POST
      path: /v1/payments
      body: { amount: '{{input.amount}}', currency: EUR, client_ref: '{{operation_id}}' }
    input:
      type: object
      properties: { amount: { type: integer, minimum: 1 }, memo: { type: string } }
      required: [amount]
      additionalProperties: false
    response: { type: object, properties: { id: { type: string } }, required: [id] }
    remote_ref: id
    timeouts: { first_byte_ms: ${o.deadlineMs ?? 5000} }
${o.approvals ? 'approvals:\n  approver: elicitation\n  wait_ms: 5000\n  actions: { create_payment: auto }\n' : ''}policy:
${o.policy}
`;
}

export interface PolicyGateway {
  dir: string;
  call(args: Record<string, unknown>): Promise<Envelope>;
  asked: string[];
  ledger: ReturnType<typeof openMemoryLedger>;
  close(): Promise<void>;
}

/** Writes candor.yaml and the policy files into a fresh folder and serves it. */
export async function startPolicyGateway(
  yaml: string,
  files: Record<string, string>,
  answers: boolean[] = [],
): Promise<PolicyGateway> {
  const dir = mkdtempSync(join(tmpdir(), 'candor-policy-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const file = join(dir, 'candor.yaml');
  writeFileSync(file, yaml);
  const loaded = await loadConfig(file);
  if (!loaded.ok) throw new Error(loaded.failure.message);
  const ledger = openMemoryLedger();
  const { gateway } = composeGateway({
    loaded: loaded.value,
    ledger,
    env: { [PAY_TOKEN_VAR]: PAY_TOKEN },
  });
  const server = gateway.createServer();
  const client = new Client(
    { name: 'policy-test', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  const asked: string[] = [];
  client.setRequestHandler(ElicitRequestSchema, (req) => {
    asked.push(req.params.message);
    return { action: 'accept', content: { approve: answers.shift() ?? false } };
  });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await Promise.all([server.connect(a), client.connect(b)]);
  return {
    dir,
    asked,
    ledger,
    async call(args) {
      const r = (await client.callTool({
        name: 'create_payment',
        arguments: args,
      })) as CallToolResult;
      return r.structuredContent as unknown as Envelope;
    },
    async close() {
      await client.close();
      await gateway.idle();
      await ledger.close();
    },
  };
}
