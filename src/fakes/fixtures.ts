// Fixture files (DESIGN.md §4): YAML (or JSON) with `cases`. A case with a `fixture_response`
// makes the fake answer requests whose request id (`x-candor-call-id` or `x-correlation-id`) is
// the case id, and whose method and path match `request`, with exactly that response. `expect`
// belongs to the matrix runner and is carried through unread.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import type { Fault } from './faults.js';

const headerValue = z.union([z.string(), z.number()]);

export const fixtureCaseSchema = z.object({
  id: z.string().min(1).describe('Case id; also the request id the fake answers.'),
  request: z.strictObject({
    method: z.string().min(1),
    /** Path without query; `:param` segments match any value. */
    path: z.string().startsWith('/'),
  }),
  fixture_response: z
    .strictObject({
      status: z.number().int().min(100).max(599),
      headers: z.record(z.string(), headerValue).optional(),
      body: z.unknown().optional(),
    })
    .optional(),
  expect: z.record(z.string(), z.unknown()).optional(),
});
export type FixtureCase = z.output<typeof fixtureCaseSchema>;

export const fixtureFileSchema = z.object({
  cases: z.array(fixtureCaseSchema),
});
export type FixtureFile = z.output<typeof fixtureFileSchema>;

export type LoadResult =
  | { ok: true; value: FixtureCase[]; failure?: never }
  | { ok: false; failure: { file: string; message: string }; value?: never };

/** Parse one fixture document (YAML is a superset of JSON). */
export function parseFixtureText(text: string, file: string): LoadResult {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    return {
      ok: false,
      failure: { file, message: `not valid YAML: ${(e as Error).message.split('\n')[0] ?? ''}` },
    };
  }
  const parsed = fixtureFileSchema.safeParse(doc);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join('.') ?? '';
    return {
      ok: false,
      failure: {
        file,
        message: `${where === '' ? '' : `${where}: `}${issue?.message ?? 'invalid'}`,
      },
    };
  }
  return { ok: true, value: parsed.data.cases };
}

/** Every `*.yaml`, `*.yml` and `*.json` file directly in `dir`, in name order. Case ids must be unique. */
export async function loadFixtureDir(dir: string): Promise<LoadResult> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => /\.(ya?ml|json)$/i.test(n)).sort();
  } catch (e) {
    return {
      ok: false,
      failure: { file: dir, message: (e as NodeJS.ErrnoException).code ?? 'unreadable' },
    };
  }
  const cases: FixtureCase[] = [];
  const seen = new Set<string>();
  for (const name of names) {
    const result = parseFixtureText(await readFile(join(dir, name), 'utf8'), name);
    if (!result.ok) return result;
    for (const c of result.value) {
      if (seen.has(c.id))
        return { ok: false, failure: { file: name, message: `duplicate case id ${c.id}` } };
      seen.add(c.id);
      cases.push(c);
    }
  }
  return { ok: true, value: cases };
}

/** The standing fault that serves a fixture case, or undefined for a case without a response. */
export function fixtureFault(c: FixtureCase): Fault | undefined {
  const r = c.fixture_response;
  if (r === undefined) return undefined;
  const fault: Fault = {
    phase: 'status',
    match: { call_id: c.id, method: c.request.method, path: c.request.path },
    times: 'always',
    status: r.status,
  };
  if (r.headers !== undefined) fault.headers = r.headers;
  if (r.body !== undefined) fault.body = r.body;
  return fault;
}
