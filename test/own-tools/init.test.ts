// candor init --openapi: the petstore becomes a configuration the gateway's own loader accepts,
// with guesses marked, lookups where a list finds a client reference, and vault: credentials; a
// bad document is one line naming the file and the place, and leaves no file behind.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { parseConfig } from '../../src/config/load.js';

const PETSTORE = 'examples/openapi/petstore.yaml';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) },
    out,
    err,
  };
}

const tmp = (): string => mkdtempSync(join(tmpdir(), 'candor-init-'));

describe('candor init --openapi', () => {
  it('writes a configuration the loader accepts, one action per operation', async () => {
    const file = join(tmp(), 'candor.yaml');
    const t = io();
    expect(await main(['init', '--openapi', PETSTORE, '--out', file], t.io)).toBe(0);
    expect(t.err.join('')).toBe('');
    const text = readFileSync(file, 'utf8');
    const loaded = parseConfig(text, file);
    if (!loaded.ok) throw new Error(loaded.failure.message);
    const { config } = loaded.value;
    expect(config.actions.map((a) => `${a.name}:${a.class}`)).toEqual([
      'find_pets:read',
      'add_pet:create',
      'get_pet_by_id:read',
      'update_pet:set_state',
      'delete_pet:destructive',
      'search_orders:read',
      'place_order:financial',
      'get_order_by_id:read',
      'delete_order:destructive',
      'create_user:create',
      'get_user_by_id:read',
      'update_user:set_state',
      'delete_user:destructive',
    ]);
    const add = config.actions.find((a) => a.name === 'add_pet')!;
    // Input from the body ($ref'd NewPet), the client reference filled with the operation id.
    expect(add.input).toMatchObject({ required: ['name', 'status'] });
    expect(Object.keys(add.input.properties as object)).not.toContain('client_ref');
    expect(add.request.body).toMatchObject({
      client_ref: '{{operation_id}}',
      name: '{{input.name}}',
    });
    expect(add.reconcile).toEqual({
      method: 'GET',
      path: '/pet?client_ref={{operation_id}}',
      shape: 'list',
      items: '.',
      ref: 'id',
      identify: { client_ref: '{{operation_id}}' },
      // The loader's default bound on a lookup's answer (docs/configuration.md).
      max_answer_bytes: 4 * 1024 * 1024,
    });
    const update = config.actions.find((a) => a.name === 'update_pet')!;
    expect(update.request.path).toBe('/pet/{{input.petId}}');
    expect(update.input.properties).toMatchObject({ petId: { type: 'integer' } });
    // The declared Idempotency-Key: a destination that claims it, checked later by the matrix.
    const order = config.actions.find((a) => a.name === 'place_order')!;
    expect(config.destinations[order.destination]?.idempotency).toMatchObject({
      header: 'Idempotency-Key',
      honoured: true,
    });
    // Security schemes become vault: references, never values.
    expect(
      Object.values(config.credentials)
        .map((c) => c.ref)
        .sort(),
    ).toEqual(['vault:petstore-api-key', 'vault:petstore-petstore-auth']);
    expect(config.destinations[add.destination]?.credential).toBe('petstore_auth');
    // Guesses and missing lookups are marked for a person.
    expect(text).toContain('class create (guessed from POST; a guess');
    expect(text).toContain('class destructive (declared by x-candor-class)');
    expect(text.match(/TODO: lookup/g)?.length).toBe(5);
  });

  it('refuses to overwrite a file without --force', async () => {
    const file = join(tmp(), 'candor.yaml');
    writeFileSync(file, 'mine\n');
    const t = io();
    expect(await main(['init', '--openapi', PETSTORE, '--out', file], t.io)).toBe(2);
    expect(t.err.join('')).toContain('exists; pass --force');
    expect(readFileSync(file, 'utf8')).toBe('mine\n');
  });

  const bad: Array<[string, string, RegExp]> = [
    [
      'unparseable.yaml',
      'openapi: 3.0.3\ninfo: {title: x\n  bad: [\n',
      /unparseable\.yaml:2:15: Implicit keys need to be on a single line/,
    ],
    [
      'invalid.yaml',
      'openapi: 3.0.3\ninfo: {title: x, version: "1"}\npaths:\n  /a/{id}:\n    get:\n      operationId: a\n      parameters:\n        - {name: id, in: body}\n      responses: {"200": {description: ok}}\n',
      /invalid\.yaml:8:26: \/paths\/~1a~1\{id\}\/get\/parameters\/0\/in: "in" is path, query, header or cookie, not "body"$/m,
    ],
    [
      'dangling.yaml',
      'openapi: 3.0.3\ninfo: {title: x, version: "1"}\npaths:\n  /a:\n    get:\n      operationId: a\n      responses:\n        "200": { $ref: "#/components/responses/Nope" }\n',
      /dangling\.yaml:8:24: \/paths\/~1a\/get\/responses\/200\/\$ref: "#\/components\/responses\/Nope" points nowhere in the document/,
    ],
    [
      'swagger.yaml',
      'swagger: "2.0"\ninfo: {title: x, version: "1"}\npaths: {}\n',
      /swagger\.yaml:1:10: \/swagger: Swagger 2\.0 is not supported/,
    ],
  ];
  for (const [name, text, message] of bad) {
    it(`${name}: one line naming the file and the place, exit 2, nothing written`, async () => {
      const dir = tmp();
      const spec = join(dir, name);
      writeFileSync(spec, text);
      const out = join(dir, 'candor.yaml');
      const t = io();
      expect(await main(['init', '--openapi', spec, '--out', out], t.io)).toBe(2);
      const err = t.err.join('');
      expect(err).toMatch(message);
      expect(err.trim().split('\n')).toHaveLength(1);
      expect(existsSync(out)).toBe(false);
    });
  }

  it('a document invalid only where Candor does not read loads, with the problem as a warning', async () => {
    const dir = tmp();
    const spec = join(dir, 'loose.yaml');
    // No info.version, a stray top-level key and an example of the wrong type: none is read.
    writeFileSync(
      spec,
      'openapi: 3.0.3\ninfo: {title: x}\nstray: true\npaths:\n  /a:\n    get:\n      operationId: a\n      responses:\n        "200":\n          description: ok\n          content:\n            application/json:\n              schema: {type: object, properties: {n: {type: integer, example: nope}}}\n',
    );
    const out = join(dir, 'candor.yaml');
    const t = io();
    expect(await main(['init', '--openapi', spec, '--out', out], t.io)).toBe(0);
    const err = t.err.join('');
    expect(err).toMatch(
      /^candor init: warning: .*loose\.yaml:1:1: \(root\): the document breaks the OpenAPI schema where Candor does not read it \(must NOT have additional properties \("stray"\)\); loaded anyway$/m,
    );
    expect(existsSync(out)).toBe(true);
  });

  it('a body field named like a path parameter is sent under its own name, both in the request', async () => {
    const dir = tmp();
    const spec = join(dir, 'clash.yaml');
    writeFileSync(
      spec,
      'openapi: 3.0.3\ninfo: {title: x, version: "1"}\npaths:\n  /things/{name}:\n    put:\n      operationId: renameThing\n      parameters: [{name: name, in: path, required: true, schema: {type: string}}]\n      requestBody:\n        content:\n          application/json:\n            schema: {type: object, required: [name], properties: {name: {type: string}, size: {type: integer}}}\n      responses: {"200": {description: ok}}\n',
    );
    const out = join(dir, 'candor.yaml');
    expect(await main(['init', '--openapi', spec, '--out', out], io().io)).toBe(0);
    const text = readFileSync(out, 'utf8');
    const loaded = parseConfig(text, out);
    if (!loaded.ok) throw new Error(loaded.failure.message);
    const a = loaded.value.config.actions[0]!;
    expect(a.request.path).toBe('/things/{{input.name}}');
    expect(a.request.body).toEqual({ name: '{{input.body_name}}', size: '{{input.size}}' });
    expect(a.input).toMatchObject({ required: ['name', 'body_name'] });
    expect(text).toContain('body field "name" is input "body_name"');
  });

  it('a missing document is an environment problem (exit 3)', async () => {
    const t = io();
    expect(await main(['init', '--openapi', join(tmp(), 'nope.yaml')], t.io)).toBe(3);
    expect(t.err.join('')).toMatch(/nope\.yaml: cannot read \(ENOENT\)/);
  });
});
