// Loads candor.yaml. A bad configuration fails at start with one line per problem:
// `FILE:LINE:COL: field.path: problem`. Nothing is guessed: unknown keys, wrong types, dangling
// references and unusable schemas are all errors.
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { LineCounter, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { buildActions, checkConfig, type ConfiguredAction } from './actions.js';
import { fieldName, formatIssue, issueAt, type ConfigIssue, type FieldPath } from './locate.js';
import { resolveConfigPaths } from './paths.js';
import { configSchema, type GatewayConfig } from './schema.js';

export interface LoadedConfig {
  file: string;
  config: GatewayConfig;
  actions: ConfiguredAction[];
  /**
   * The folder of the configuration file (absolute), which its relative paths are resolved against
   * (config/paths.ts); absent for text that did not come from a file.
   */
  dir?: string;
  /** The place of a field in the file, for problems found after load (e.g. against the vault). */
  locate?: (path: FieldPath, problem: string, at?: 'value' | 'key') => ConfigIssue;
}

export type LoadFailure =
  | { code: 'invalid_config'; issues: ConfigIssue[]; message: string }
  | { code: 'unreadable'; issues: []; message: string };

export type LoadResult =
  | { ok: true; value: LoadedConfig; failure?: never }
  | { ok: false; failure: LoadFailure; value?: never };

export async function loadConfig(file: string): Promise<LoadResult> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return {
      ok: false,
      failure: {
        code: 'unreadable',
        issues: [],
        message: `${file}: cannot read the configuration (${typeof code === 'string' ? code : 'error'})`,
      },
    };
  }
  const parsed = parseConfig(text, file);
  if (!parsed.ok) return parsed;
  const dir = dirname(resolve(file));
  return {
    ok: true,
    value: { ...parsed.value, config: resolveConfigPaths(parsed.value.config, dir), dir },
  };
}

function zodIssues(
  file: string,
  doc: Document,
  lines: LineCounter,
  error: z.ZodError,
): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of error.issues) {
    const path = issue.path.filter(
      (p): p is string | number => typeof p === 'string' || typeof p === 'number',
    );
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys)
        out.push(issueAt(file, doc, lines, [...path, key], 'unknown key', 'key'));
      continue;
    }
    const at = issue.code === 'invalid_key' ? 'key' : 'value';
    out.push(issueAt(file, doc, lines, path, issue.message, at));
  }
  return out;
}

const byPosition = (a: ConfigIssue, b: ConfigIssue): number => a.line - b.line || a.col - b.col;

/** Parses and checks configuration text; `file` is used in messages only. */
export function parseConfig(text: string, file: string): LoadResult {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const fail = (issues: ConfigIssue[]): LoadResult => ({
    ok: false,
    failure: {
      code: 'invalid_config',
      issues: issues.sort(byPosition),
      message: issues.map(formatIssue).join('\n'),
    },
  });
  if (doc.errors.length > 0) {
    return fail(
      doc.errors.map((e) => {
        const pos = lines.linePos(e.pos[0]);
        return {
          file,
          line: pos.line,
          col: pos.col,
          field: '',
          problem: e.message.split('\n')[0]!,
        };
      }),
    );
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch {
    // The yaml library refuses alias expansion beyond maxAliasCount (a "billion laughs" file).
    return fail([
      {
        file,
        line: 1,
        col: 1,
        field: '',
        problem: 'too many YAML aliases: the file expands beyond what a configuration needs',
      },
    ]);
  }
  if (raw === null || raw === undefined)
    return fail([{ file, line: 1, col: 1, field: '', problem: 'the configuration is empty' }]);
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) return fail(zodIssues(file, doc, lines, parsed.error));
  const problems = checkConfig(parsed.data);
  if (problems.length > 0)
    return fail(problems.map((p) => issueAt(file, doc, lines, p.path, p.problem, p.at ?? 'value')));
  try {
    return {
      ok: true,
      value: {
        file,
        config: parsed.data,
        actions: buildActions(parsed.data),
        locate: (path, problem, at = 'value') => issueAt(file, doc, lines, path, problem, at),
      },
    };
  } catch (error) {
    // checkConfig converts every schema first, so this is a defect, reported with its place.
    return fail([
      {
        file,
        line: 1,
        col: 1,
        field: fieldName([]),
        problem: `cannot build the actions: ${error instanceof Error ? error.message : String(error)}`,
      },
    ]);
  }
}
