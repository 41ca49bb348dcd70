// The dependency direction of DESIGN.md §6 is enforced by the lint configuration itself: probe
// sources, placed (by name only) in the real folders, are linted with the project's
// eslint.config.js through ESLint's Node API. An engine file importing a transport adapter, an
// adapter importing the engine and core importing the ledger are errors; the engine importing the
// transport port is not (the control).
//
// Nothing is written into src/: the probes are linted as text under their would-be paths, with
// only the import rule and without type information (which the rule does not use). A probe file
// on disk was seen by the tests that list src/ while it existed (engine-readme counted it).
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const probes: Array<{ path: string; source: string }> = [];

function probe(folder: string, source: string): string {
  const path = join(root, 'src', folder, `lint-probe-${probes.length}.ts`);
  probes.push({ path, source });
  return path;
}

const RULE = 'no-restricted-imports';

describe('lint: dependency direction (DESIGN.md §6)', () => {
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
      const eslint = new ESLint({
        cwd: root,
        ruleFilter: ({ ruleId }) => ruleId === RULE,
        overrideConfig: { languageOptions: { parserOptions: { projectService: false } } },
      });
      const results = (
        await Promise.all(probes.map((p) => eslint.lintText(p.source, { filePath: p.path })))
      ).flat();
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
