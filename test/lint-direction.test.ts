// The dependency direction of DESIGN.md §6 is enforced by the lint configuration itself: probe
// files placed in the real folders are linted with the project's eslint.config.js through ESLint's
// Node API. An engine file importing a transport adapter, an adapter importing the engine and core
// importing the ledger are errors; the engine importing the transport port is not (the control).
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const tag = randomBytes(4).toString('hex');
const written: string[] = [];

function probe(folder: string, source: string): string {
  const path = join(root, 'src', folder, `lint-probe-${tag}-${written.length}.ts`);
  writeFileSync(path, source);
  written.push(path);
  return path;
}

afterAll(() => {
  for (const p of written) rmSync(p, { force: true });
});

const RULE = 'no-restricted-imports';

describe('lint: dependency direction (DESIGN.md §6)', () => {
  // Type-aware ESLint over the project is CPU work: minutes when the suite runs files side by side.
  it(
    'refuses engine -> http, ssh or vault, adapter -> engine and core -> ledger; allows engine -> core',
    {
      timeout: 300_000,
    },
    async () => {
      const files = {
        engineHttp: probe(
          'engine',
          "import { sendHttp } from '../http/transport.js';\nexport const probe = sendHttp;\n",
        ),
        engineSsh: probe(
          'engine',
          "import { sshTransport } from '../ssh/adapter.js';\nexport const probe = sshTransport;\n",
        ),
        engineVault: probe(
          'engine',
          "import { openVault } from '../vault/store.js';\nexport const probe = openVault;\n",
        ),
        engineRoot: probe(
          'engine',
          "import { createRuntime } from '../runtime.js';\nexport const probe = createRuntime;\n",
        ),
        httpEngine: probe(
          'http',
          "import { createEngine } from '../engine/runtime.js';\nexport const probe = createEngine;\n",
        ),
        engineUpstream: probe(
          'engine',
          "import { mcpTransport } from '../upstream/adapter.js';\nexport const probe = mcpTransport;\n",
        ),
        upstreamEngine: probe(
          'upstream',
          "import { createEngine } from '../engine/runtime.js';\nexport const probe = createEngine;\n",
        ),
        coreLedger: probe(
          'core',
          "import type { OperationView } from '../ledger/projection.js';\nexport type Probe = OperationView;\n",
        ),
        control: probe(
          'engine',
          "import type { Transport } from '../core/transport.js';\nexport type Probe = Transport;\n",
        ),
      };
      const eslint = new ESLint({ cwd: root });
      const results = await eslint.lintFiles(Object.values(files));
      const errors = (path: string): string[] =>
        results
          .find((r) => r.filePath === path)!
          .messages.filter((m) => m.severity === 2)
          .map((m) => `${m.ruleId}: ${m.message}`);

      expect(errors(files.engineHttp)).toEqual([
        expect.stringMatching(
          new RegExp(`^${RULE}: .*DESIGN\\.md §6: the engine must not import http/`),
        ),
      ]);
      expect(errors(files.engineSsh)).toEqual([
        expect.stringMatching(new RegExp(`^${RULE}: .*the engine must not import ssh/`)),
      ]);
      expect(errors(files.engineVault)).toEqual([
        expect.stringMatching(new RegExp(`^${RULE}: .*the engine must not import vault/`)),
      ]);
      expect(errors(files.engineRoot)).toEqual([
        expect.stringMatching(new RegExp(`^${RULE}: .*composition root`)),
      ]);
      expect(errors(files.httpEngine)).toEqual([
        expect.stringMatching(
          new RegExp(
            `^${RULE}: .*an adapter \\(http, ssh, upstream, vault\\) must not import engine/`,
          ),
        ),
      ]);
      expect(errors(files.engineUpstream)).toEqual([
        expect.stringMatching(new RegExp(`^${RULE}: .*the engine must not import upstream/`)),
      ]);
      expect(errors(files.upstreamEngine)).toEqual([
        expect.stringMatching(
          new RegExp(
            `^${RULE}: .*an adapter \\(http, ssh, upstream, vault\\) must not import engine/`,
          ),
        ),
      ]);
      expect(errors(files.coreLedger)).toEqual([
        expect.stringMatching(
          new RegExp(`^${RULE}: .*core \\(pure, no I/O\\) must not import ledger/`),
        ),
      ]);
      // The control: the port is where the engine meets transports.
      expect(errors(files.control)).toEqual([]);
    },
  );
});
