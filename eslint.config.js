// Type-aware lint plus the dependency direction of DESIGN.md §6: cli|mcp|web -> engine -> core;
// adapters (ledger, http, ssh, vault) -> core; core imports nothing else of ours. The engine reaches
// transports only through the port in core/transport.ts; src/runtime.ts composes the adapters.
// test/lint-direction.test.ts proves these rules fire.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const folders = [
  'core',
  'ledger',
  'engine',
  'http',
  'ssh',
  'approvals',
  'vault',
  'upstream',
  'config',
  'mcp',
  'fakes',
  'matrix',
  'telemetry',
  'agent',
  'web',
  'cli',
];
const except = (...allowed) => folders.filter((f) => !allowed.includes(f));
// The composition root and the public entry import adapters: reaching them is reaching adapters.
const roots = (why) => ({
  group: ['../runtime.js', '../index.js', '../../runtime.js', '../../index.js'],
  message: `DESIGN.md §6: ${why} must not import the composition root (src/runtime.ts) or the entry`,
});
const forbid = (who, banned, extra = []) => ({
  'no-restricted-imports': [
    'error',
    {
      patterns: [
        ...banned.map((f) => ({
          group: [`../${f}/*`, `../../${f}/*`, `../${f}`, `../../${f}`],
          message: `DESIGN.md §6: ${who} must not import ${f}/`,
        })),
        ...extra,
      ],
    },
  ],
});

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'coverage/**',
      '.candor/**',
      'bin/**',
      'eslint.config.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: [
            'bench/*.js',
            'scripts/*.js',
            'bench/support/*.js',
            'scripts/*.mjs',
            'test/fixtures/*/*.mjs',
          ],
          // Benchmarks and child-process fixtures are plain JavaScript outside the tsconfig.
          maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 32,
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      'no-restricted-syntax': [
        'error',
        {
          selector: 'TSEnumDeclaration',
          message: 'Use const objects plus union types, not enum (STYLE.md).',
        },
      ],
    },
  },
  {
    files: ['src/core/**/*.ts'],
    rules: forbid('core (pure, no I/O)', except('core'), [
      roots('core'),
      {
        group: [
          'node:fs',
          'node:net',
          'node:http',
          'node:child_process',
          'fs',
          'net',
          'http',
          'child_process',
        ],
        message: 'core is pure: no I/O',
      },
    ]),
  },
  {
    // The ledger's backends (memory/, sqlite/, postgres/) share its port, events and projections.
    files: ['src/ledger/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: forbid('the ledger', except('core', 'ledger'), [roots('the ledger')]),
  },
  {
    files: ['src/http/**/*.ts', 'src/ssh/**/*.ts', 'src/upstream/**/*.ts', 'src/vault/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: forbid('an adapter (http, ssh, upstream, vault)', except('core'), [roots('an adapter')]),
  },
  {
    // The engine imports ports (core, the ledger's port and projections), never a transport, the
    // vault or approvals (their ports are in engine/ports.ts; redaction is pure, in core) or a
    // ledger backend. Its tests compose a runtime and may reach adapters.
    files: ['src/engine/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: forbid(
      'the engine',
      [
        'http',
        'ssh',
        'upstream',
        'vault',
        'approvals',
        'config',
        'mcp',
        'fakes',
        'matrix',
        'agent',
        'web',
        'cli',
      ],
      [
        roots('the engine'),
        {
          group: ['../ledger/memory/*', '../ledger/sqlite/*', '../ledger/postgres/*'],
          message: 'DESIGN.md §6: the engine uses the LedgerStore port, never a ledger backend',
        },
      ],
    ),
  },
  {
    // Plain ESM scripts run by node directly (benchmarks, child processes of tests): no types to check.
    files: ['bench/**/*.js', 'scripts/**/*.js', 'scripts/**/*.mjs', 'test/fixtures/**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        URL: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        performance: 'readonly',
      },
    },
  },
  {
    files: ['**/*.test.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
    },
  },
);
