// Policy files: parsed and validated by Cedar itself (@cedar-policy/cedar-wasm) against the schema
// generated from candor.yaml (cedar-types.ts). Every problem is one line `FILE:LINE:COL: problem`,
// the place taken from Cedar's own source locations.
//
// Policy ids: `@id("…")` when the policy has one (unique across files), else `FILE:LINE` of the
// policy's first line. Annotations Candor reads: `@approval("required")` on a `forbid` (the call
// needs a person instead of being denied) and `@reason("…")` (the sentence the agent and the
// approval card see).
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import {
  checkParsePolicySet,
  policySetTextToParts,
  policyToJson,
  validate,
  type DetailedError,
  type SchemaJson,
} from '@cedar-policy/cedar-wasm/nodejs';

export interface PolicyProblem {
  file: string;
  line: number;
  col: number;
  message: string;
}

export interface LoadedPolicy {
  id: string;
  file: string;
  line: number;
  effect: 'permit' | 'forbid';
  /** `@approval("required")` on a forbid: a person may let the call through. */
  approval: boolean;
  reason: string | null;
  text: string;
}

export type PolicyLoad =
  | { ok: true; value: LoadedPolicy[]; failure?: never }
  | { ok: false; failure: PolicyProblem[]; value?: never };

export const formatProblem = (p: PolicyProblem): string =>
  `${p.file}:${p.line}:${p.col}: ${p.message}`;

/** Line and column (1-based) of a UTF-8 byte offset, as Cedar reports them. */
export function positionOf(text: string, byteOffset: number): { line: number; col: number } {
  const before = Buffer.from(text, 'utf8').subarray(0, Math.max(0, byteOffset)).toString('utf8');
  const lines = before.split('\n');
  return { line: lines.length, col: (lines.at(-1)?.length ?? 0) + 1 };
}

function problemsOf(file: string, text: string, errors: readonly DetailedError[]): PolicyProblem[] {
  return errors.map((e) => {
    const at = e.sourceLocations?.[0];
    const pos = at ? positionOf(text, at.start) : { line: 1, col: 1 };
    const label = at?.label ? ` (${at.label})` : '';
    const help = e.help ? `; ${e.help}` : '';
    // Cedar names policies of one file policy0, policy1…; the place already says which one.
    const message = e.message.replace(/^for policy `policy\d+`, /, '');
    return { file, ...pos, message: `${message}${label}${help}` };
  });
}

/** Reads and checks the files; `schema` null skips validation (parse only). */
export function loadPolicyFiles(
  files: readonly string[],
  schema: SchemaJson<string> | null,
): PolicyLoad {
  const sources: Array<{ file: string; text: string }> = [];
  const problems: PolicyProblem[] = [];
  for (const file of files) {
    try {
      sources.push({ file, text: readFileSync(file, 'utf8') });
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      problems.push({
        file,
        line: 1,
        col: 1,
        message: `cannot read the policy file (${typeof code === 'string' ? code : 'error'})`,
      });
    }
  }
  if (problems.length > 0) return { ok: false, failure: problems };
  return loadPolicyTexts(sources, schema);
}

/** Parses, splits and validates policy texts (tests and `candor policy` use this directly). */
export function loadPolicyTexts(
  sources: ReadonlyArray<{ file: string; text: string }>,
  schema: SchemaJson<string> | null,
): PolicyLoad {
  const problems: PolicyProblem[] = [];
  const out: LoadedPolicy[] = [];
  const ids = new Map<string, string>();
  for (const { file, text } of sources) {
    const parsed = checkParsePolicySet({ staticPolicies: text });
    if (parsed.type === 'failure') {
      problems.push(...problemsOf(file, text, parsed.errors));
      continue;
    }
    if (schema) {
      const v = validate({ schema, policies: { staticPolicies: text } });
      if (v.type === 'failure') problems.push(...problemsOf(file, text, v.errors));
      else for (const e of v.validationErrors) problems.push(...problemsOf(file, text, [e.error]));
    }
    const parts = policySetTextToParts(text);
    if (parts.type === 'failure') {
      problems.push(...problemsOf(file, text, parts.errors));
      continue;
    }
    if (parts.policy_templates.length > 0)
      problems.push({ file, line: 1, col: 1, message: 'policy templates are not supported' });
    for (const { part, offset } of located(text, parts.policies)) {
      const { line, col } = positionOf(text, Buffer.byteLength(text.slice(0, offset)));
      const json = policyToJson(part);
      if (json.type === 'failure') {
        problems.push(...problemsOf(file, part, json.errors));
        continue;
      }
      const ann = json.json.annotations ?? {};
      const id = ann['id'] ?? `${basename(file)}:${line}`;
      const approval = ann['approval'];
      if (approval !== undefined && approval !== 'required') {
        problems.push({
          file,
          line,
          col,
          message: `@approval("${approval}"): the only value is "required"`,
        });
        continue;
      }
      if (approval !== undefined && json.json.effect !== 'forbid') {
        problems.push({
          file,
          line,
          col,
          message:
            '@approval("required") belongs on a forbid policy (what it forbids, a person may allow)',
        });
        continue;
      }
      const seen = ids.get(id);
      if (seen !== undefined) {
        problems.push({
          file,
          line,
          col,
          message: `policy id "${id}" is used twice (also at ${seen})`,
        });
        continue;
      }
      ids.set(id, `${file}:${line}`);
      out.push({
        id,
        file,
        line,
        effect: json.json.effect,
        approval: approval === 'required',
        reason: ann['reason'] ?? null,
        text: part,
      });
    }
  }
  if (problems.length > 0) return { ok: false, failure: problems };
  return { ok: true, value: out };
}

/** Each part (verbatim policy text) with its offset in the file, in file order. */
function located(text: string, parts: readonly string[]): Array<{ part: string; offset: number }> {
  const used = new Set<number>();
  const out: Array<{ part: string; offset: number }> = [];
  for (const part of parts) {
    let at = text.indexOf(part);
    while (at >= 0 && used.has(at)) at = text.indexOf(part, at + 1);
    used.add(at);
    out.push({ part, offset: Math.max(0, at) });
  }
  return out.sort((a, b) => a.offset - b.offset);
}
