// The starter configuration `candor init` writes when no OpenAPI document is given: one HTTP
// action pair against `candor fake serve --port 8787`, one proxied MCP server (a small notes server
// written beside it, so it works offline), the ledger and the vault. It must serve and answer a
// call as written (test/first-hour.test.ts).

export const FAKE_PORT = 8787;
export const NOTES_SCRIPT = 'candor-notes.mjs';

export function starterYaml(cli: string, config: string): string {
  return `# Candor gateway configuration: a starter that works as is.
#
#   ${cli} fake serve --port ${FAKE_PORT}          # another terminal: the fault-injecting fake service
#   ${cli} serve --config ${config}       # the MCP gateway over stdio (--http 3100: Streamable HTTP)
#   ${cli} client-config --client claude-desktop --config ${config}   # put it in front of your agent
#
# Relative paths in this file are relative to this file's folder, wherever the gateway is started.
# Credentials are references (env:VAR or vault:NAME), never values. \`${cli} schema config\` prints
# the JSON Schema of this file for editors.
version: 1

# Every operation, attempt and observation, hash-chained. Look: ${cli} ops list --config ${config}
ledger: sqlite:./.candor/ledger.db

# The encrypted credential store (./.candor/vault.json) and its key: keep both out of version control.
vault:
  key_file: ./.candor/vault.key

# To send a credential, uncomment these lines and the destination's \`credential:\`, then store the
# value (prompted, never on the command line): ${cli} vault set records-token --config ${config}
# credentials:
#   records-token: { ref: vault:records-token }   # sent as a Bearer token (vault set --type to change)

destinations:
  records:
    origin: http://127.0.0.1:${FAKE_PORT}
    route_prefix: /v1/records
    # credential: records-token
    # The fake ignores idempotency keys here: after a lost reply the gateway looks the record up.

actions:
  - name: create_record
    class: create
    subject: the record
    description: Create a record. It carries this operation's id as client_ref, so a lost reply can be looked up.
    destination: records
    request:
      method: POST
      path: /v1/records
      body: { title: '{{input.title}}', client_ref: '{{operation_id}}' }
    input:
      type: object
      properties:
        title: { type: string, minLength: 1, description: what the record is about }
      required: [title]
      additionalProperties: false
    response:
      type: object
      properties: { id: { type: string }, title: { type: string }, state: { type: string } }
      required: [id]
    remote_ref: id
    reconcile: { method: GET, path: '/v1/records?client_ref={{operation_id}}', items: items, ref: id }

  - name: get_record
    class: read
    subject: the record
    description: Read a record by id.
    destination: records
    request: { method: GET, path: '/v1/records/{{input.id}}' }
    input:
      type: object
      properties: { id: { type: string, minLength: 1 } }
      required: [id]
      additionalProperties: false

# MCP servers Candor stands in front of: each of their tools becomes a tool of this gateway
# (notes_add_note, notes_list_notes), every call an operation in the ledger. \`node\` is the Node.js
# that runs Candor. Replace it with yours, e.g. command: npx, args: [-y, some-mcp-server].
upstreams:
  notes:
    command: node
    args: [./${NOTES_SCRIPT}]
`;
}

/** A dependency-free MCP server over stdio (newline-delimited JSON-RPC) that keeps notes in a file. */
export const NOTES_SERVER = `#!/usr/bin/env node
// A tiny MCP server for the starter candor.yaml: add_note and list_notes, kept in
// ./.candor/notes.json. No dependencies, so it runs anywhere Node.js does.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const FILE = '.candor/notes.json';
const load = () => {
  try {
    return JSON.parse(readFileSync(FILE, 'utf8'));
  } catch {
    return [];
  }
};
const tools = [
  {
    name: 'add_note',
    description: 'Add a note.',
    inputSchema: {
      type: 'object',
      properties: { text: { type: 'string', minLength: 1 } },
      required: ['text'],
    },
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  },
  {
    name: 'list_notes',
    description: 'List the notes.',
    inputSchema: { type: 'object', properties: {} },
    annotations: { readOnlyHint: true },
  },
];
const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\\n');
const text = (value) => ({
  content: [{ type: 'text', text: JSON.stringify(value) }],
  structuredContent: value,
});

function call(name, args) {
  if (name === 'list_notes') return text({ notes: load() });
  if (name === 'add_note') {
    if (typeof args?.text !== 'string' || args.text === '')
      return { ...text({ error: 'text is required' }), isError: true };
    const notes = load();
    const note = { id: 'note-' + (notes.length + 1), text: args.text };
    notes.push(note);
    mkdirSync('.candor', { recursive: true });
    writeFileSync(FILE, JSON.stringify(notes, null, 2));
    return text(note);
  }
  return null;
}

createInterface({ input: process.stdin }).on('line', (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return send({ id: null, error: { code: -32700, message: 'parse error' } });
  }
  if (msg.id === undefined) return; // notifications
  if (msg.method === 'initialize')
    return send({
      id: msg.id,
      result: {
        protocolVersion: msg.params?.protocolVersion ?? '2025-06-18',
        capabilities: { tools: {} },
        serverInfo: { name: 'candor-notes', version: '1.0.0' },
      },
    });
  if (msg.method === 'ping') return send({ id: msg.id, result: {} });
  if (msg.method === 'tools/list') return send({ id: msg.id, result: { tools } });
  if (msg.method === 'tools/call') {
    const result = call(msg.params?.name, msg.params?.arguments);
    return result === null
      ? send({ id: msg.id, error: { code: -32602, message: 'unknown tool' } })
      : send({ id: msg.id, result });
  }
  send({ id: msg.id, error: { code: -32601, message: 'method not found' } });
});
`;
