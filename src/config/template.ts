// Request templates: `{{input.a.b}}`, `{{operation_id}}`, `{{correlation_id}}`,
// `{{idempotency_key}}`. A string that is exactly one placeholder keeps the value's JSON type (so
// `amount: "{{input.amount}}"` sends a number); anywhere else the value is turned into text. In a
// path every value is URL-encoded, so an argument can never add a path segment or a query field.
import { UsageError } from '../engine/runtime.js';

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\s*\}\}/g;
const WHOLE = /^\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\s*\}\}$/;
const CONTEXT_NAMES = new Set(['operation_id', 'correlation_id', 'idempotency_key']);

export interface TemplateScope {
  input?: unknown;
  operation_id: string;
  correlation_id: string;
  idempotency_key: string | null;
}

/** Every placeholder name used in a template value (strings anywhere inside it). */
export function placeholdersIn(template: unknown): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') {
      for (const m of v.matchAll(PLACEHOLDER)) out.push(m[1]!);
    } else if (Array.isArray(v)) {
      v.forEach(walk);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        walk(k);
        walk(x);
      }
    }
  };
  walk(template);
  return out;
}

/**
 * Why a placeholder cannot be used, or null when it can. `inputFields` are the top-level properties
 * of the input schema (null: not declared, any name accepted).
 */
export function placeholderProblem(
  name: string,
  inputFields: ReadonlySet<string> | null,
): string | null {
  if (CONTEXT_NAMES.has(name)) return null;
  if (name.startsWith('input.')) {
    const field = name.split('.')[1]!;
    if (inputFields !== null && !inputFields.has(field))
      return `{{${name}}}: the input schema has no property "${field}"`;
    return null;
  }
  return `{{${name}}}: unknown placeholder (use input.FIELD, operation_id, correlation_id or idempotency_key)`;
}

function lookup(name: string, scope: TemplateScope): unknown {
  if (name === 'operation_id') return scope.operation_id;
  if (name === 'correlation_id') return scope.correlation_id;
  if (name === 'idempotency_key') return scope.idempotency_key ?? undefined;
  let v: unknown = scope.input;
  for (const part of name.split('.').slice(1)) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

const asText = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

/**
 * Renders a path: each value URL-encoded; a missing value is misuse, never an empty segment. The
 * result always stays on the destination's origin: it starts with exactly one `/` (never `//host`,
 * which a URL parser reads as another host), and no value may be empty in the path part (an empty
 * first value would turn `/{{a}}/{{b}}` into `//b`; elsewhere it silently changes the route).
 */
export function renderPath(template: string, scope: TemplateScope): string {
  const queryAt = template.indexOf('?');
  const path = template.replace(PLACEHOLDER, (_: string, name: string, at: number) => {
    const v = lookup(name, scope);
    if (v === undefined || v === null)
      throw new UsageError('invalid_input', `the request path needs a value for {{${name}}}`);
    const text = asText(v);
    if (text === '' && (queryAt < 0 || at < queryAt))
      throw new UsageError('invalid_input', `the request path needs a non-empty {{${name}}}`);
    return encodeURIComponent(text);
  });
  if (!path.startsWith('/') || path.startsWith('//'))
    throw new UsageError('invalid_input', 'the request path must start with a single "/"');
  // `.` and `..` survive encoding and would be resolved as dot segments, leaving the route.
  if (
    path
      .split('?')[0]!
      .split('/')
      .some((s) => s === '.' || s === '..')
  )
    throw new UsageError('invalid_input', 'an argument would put a dot segment in the path');
  return path;
}

/** Renders a header value; a value that could split the header line is misuse. */
export function renderHeader(template: string, scope: TemplateScope): string {
  const out = template.replace(PLACEHOLDER, (_, name: string) => {
    const v = lookup(name, scope);
    return v === undefined || v === null ? '' : asText(v);
  });
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(out))
    throw new UsageError('invalid_input', 'a header value would contain a control character');
  return out;
}

/**
 * Renders a JSON body template. A whole-placeholder string whose value is missing drops the key
 * (objects) or becomes null (arrays), so optional arguments stay optional.
 */
export function renderBody(template: unknown, scope: TemplateScope): unknown {
  if (typeof template === 'string') {
    const whole = WHOLE.exec(template);
    if (whole) return lookup(whole[1]!, scope);
    return template.replace(PLACEHOLDER, (_, name: string) => {
      const v = lookup(name, scope);
      return v === undefined || v === null ? '' : asText(v);
    });
  }
  if (Array.isArray(template)) return template.map((t) => renderBody(t, scope) ?? null);
  if (template !== null && typeof template === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, t] of Object.entries(template)) {
      const v = renderBody(t, scope);
      if (v !== undefined) out[k] = v;
    }
    return out;
  }
  return template;
}
