// Type-aware lint plus the dependency direction of DESIGN.md §5:
// cli|mcp|web -> engine -> core; adapters -> core; core imports nothing else.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const outer = [
  'ledger',
  'engine',
  'http',
  'ssh',
  'approvals',
  'vault',
  'mcp',
  'fakes',
  'matrix',
  'agent',
  'web',
  'cli',
];
const forbid = (folders, extra = []) => ({
  'no-restricted-imports': [
    'error',
    {
      patterns: [
        ...folders.map((f) => ({
          group: [`../${f}/*`, `../../${f}/*`],
          message: `DESIGN.md §5: this folder must not import ${f}/`,
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
          allowDefaultProject: ['bench/*.js', 'bench/support/*.js', 'test/fixtures/*/*.mjs'],
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
    rules: forbid(outer, [
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
    files: ['src/ledger/**/*.ts', 'src/http/**/*.ts', 'src/ssh/**/*.ts', 'src/vault/**/*.ts'],
    rules: forbid(['engine', 'mcp', 'web', 'cli', 'matrix', 'agent']),
  },
  { files: ['src/engine/**/*.ts'], rules: forbid(['mcp', 'web', 'cli', 'matrix', 'agent']) },
  {
    // Plain ESM scripts run by node directly (benchmarks, child processes of tests): no types to check.
    files: ['bench/**/*.js', 'test/fixtures/**/*.mjs'],
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
