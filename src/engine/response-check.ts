// Checks a response body against the action's contract. The result names the failing field or
// condition for the protected diagnostics; no value is ever guessed (no `response.id ?? request.id`).
import type { z } from 'zod';
import type { ContractCheck } from '../core/evidence.js';

export interface CheckResult {
  check: ContractCheck;
  data: unknown;
  /** What failed, for diagnostics only (never the envelope). */
  problem: string | null;
}

/** The named arguments of `checkResponse`. */
export interface CheckResponseOptions {
  framing: string | undefined;
  success: z.ZodType;
  failure: z.ZodType | undefined;
}

export function checkResponse(
  status: number,
  headers: Record<string, string>,
  body: Buffer,
  { framing, success, failure }: CheckResponseOptions,
): CheckResult {
  const type = (headers['content-type'] ?? '').toLowerCase();
  const text = body.toString('utf8');
  const is2xx = status >= 200 && status < 300;
  if (is2xx && (status === 204 || (body.length === 0 && framing === 'none'))) {
    const parsed = success.safeParse(null);
    return parsed.success
      ? { check: 'valid', data: parsed.data, problem: null }
      : { check: 'violated', data: null, problem: 'empty body where the contract expects content' };
  }
  if (!type.includes('json')) {
    if (!is2xx && failure === undefined) return { check: 'unchecked', data: null, problem: null };
    return {
      check: 'violated',
      data: null,
      problem: `content-type "${type || 'none'}" is not JSON`,
    };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    const cut = framing === 'close' ? ' (unframed body: the connection end may have cut it)' : '';
    return {
      check: is2xx || failure ? 'violated' : 'unchecked',
      data: null,
      problem: `body is not valid JSON${cut}`,
    };
  }
  if (!is2xx) {
    if (failure?.safeParse(json).success)
      return { check: 'documented_failure', data: null, problem: null };
    return { check: 'unchecked', data: null, problem: null };
  }
  if (failure?.safeParse(json).success) {
    return {
      check: 'documented_failure',
      data: null,
      problem: 'error-shaped body with a success status',
    };
  }
  const parsed = success.safeParse(json);
  if (parsed.success) return { check: 'valid', data: parsed.data, problem: null };
  const issue = parsed.error.issues[0];
  const path = issue?.path.length ? issue.path.join('.') : '(root)';
  return {
    check: 'violated',
    data: null,
    problem: `${path}: ${issue?.message ?? 'contract violated'}`,
  };
}
