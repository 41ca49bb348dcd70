// Tool descriptors: configured actions and the three built-in tools, each with the envelope as its
// outputSchema and annotations derived from the action's declared class (never from the method).
// Every tool has a title (from the configuration, else readable from its name). The outputSchema is
// portable: each tool gets its own copy, with no `$id`, no empty subschema and no type arrays, so a
// validator shared across tools (or a strict one) accepts it.
import type { Tool, ToolAnnotations } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { ConfiguredAction } from '../config/actions.js';
import { envelopeJsonSchema } from '../core/envelope.js';
import { OPERATION_ID_PATTERN } from '../core/ids.js';
import type { ActionClass } from '../core/vocabulary.js';

/** Classes whose effect overwrites or removes something, or cannot be taken back. */
const DESTRUCTIVE: ReadonlySet<ActionClass> = new Set([
  'destructive',
  'financial',
  'permission_change',
  'credential_change',
  'execute',
  // Converging to a state replaces the previous one: not additive in MCP's sense.
  'set_state',
]);

/** Classes whose repetition with the same arguments has no additional effect. */
const IDEMPOTENT: ReadonlySet<ActionClass> = new Set(['read', 'set_state']);

export function annotationsFor(cls: ActionClass, title?: string): ToolAnnotations {
  return {
    ...(title !== undefined ? { title } : {}),
    readOnlyHint: cls === 'read',
    destructiveHint: DESTRUCTIVE.has(cls),
    idempotentHint: IDEMPOTENT.has(cls),
    // Every action reaches an external service.
    openWorldHint: true,
  };
}

const operationIdProperty = {
  type: 'string',
  pattern: OPERATION_ID_PATTERN.source,
  description:
    'To retry, pass the operation_id from the previous result; never start a new call for the same intent after outcome_unknown.',
};

const RETRY_GUIDE =
  'The result is a Candor envelope (structuredContent, mirrored as JSON text). Follow its `retry` field: ' +
  '"allowed" - call again with the same arguments plus operation_id; "after_delay" - the same, after retry_after_ms; ' +
  '"reconcile_first" - call reconcile_operation with the operation_id before anything else; ' +
  '"never" / "escalate" - stop (escalate: a person must decide); "after_approval" - a person was asked: call again with the same operation_id once they approved. ' +
  'To retry, pass the operation_id from the previous result; never start a new call for the same intent after outcome_unknown.';

/** Any JSON value, spelled without an empty subschema or a type array. */
const ANY_JSON = ['object', 'array', 'string', 'number', 'boolean', 'null'].map((type) => ({
  type,
}));

/** Rewrites one JSON Schema node into the portable subset (see the file comment). */
function portable(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(portable);
  if (node === null || typeof node !== 'object') return node;
  const entries = Object.entries(node as Record<string, unknown>).filter(
    ([k]) => k !== '$id' && k !== '$schema',
  );
  if (entries.length === 0) return { anyOf: ANY_JSON.map((t) => ({ ...t })) };
  // `anyOf: [{}, …]` accepts anything: say so once instead of nesting.
  const anyOf = (node as { anyOf?: unknown }).anyOf;
  if (
    Array.isArray(anyOf) &&
    anyOf.some((m: unknown) => m !== null && typeof m === 'object' && Object.keys(m).length === 0)
  )
    return { anyOf: ANY_JSON.map((t) => ({ ...t })) };
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries) {
    if (k === 'properties' && v && typeof v === 'object') {
      out[k] = Object.fromEntries(Object.entries(v).map(([p, s]) => [p, portable(s)]));
    } else if (k === 'type' && Array.isArray(v)) {
      out['anyOf'] = v.map((type: unknown) => ({ type }));
    } else {
      out[k] = portable(v);
    }
  }
  return out;
}

/** The envelope schema in the portable subset; a fresh object for every tool. */
export function outputSchema(): Tool['outputSchema'] {
  return portable(envelopeJsonSchema()) as Tool['outputSchema'];
}

/** `create_record` -> `Create record`. */
export function titleOf(name: string): string {
  const words = name.replace(/[_-]+/g, ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export function actionTool(a: ConfiguredAction): Tool {
  const schema = a.input_schema;
  const props = (schema['properties'] as Record<string, unknown> | undefined) ?? {};
  const d = a.definition;
  const title = a.title ?? titleOf(d.name);
  return {
    name: d.name,
    title,
    description: `${a.description.trim()}\n\nAction class: ${d.class}. ${RETRY_GUIDE}`,
    inputSchema: {
      ...schema,
      type: 'object',
      properties: { ...props, operation_id: operationIdProperty },
    },
    outputSchema: outputSchema(),
    annotations: annotationsFor(d.class, title),
  };
}

export const BUILTIN = {
  operation_status: 'operation_status',
  reconcile_operation: 'reconcile_operation',
  list_unresolved_operations: 'list_unresolved_operations',
} as const;
export type BuiltinName = keyof typeof BUILTIN;

export const operationArgsSchema = z.strictObject({
  operation_id: z.string().regex(OPERATION_ID_PATTERN, 'an operation id looks like op_…'),
});
export const noArgsSchema = z.strictObject({});

const byId = {
  type: 'object',
  properties: {
    operation_id: { type: 'string', pattern: OPERATION_ID_PATTERN.source },
  },
  required: ['operation_id'],
  additionalProperties: false,
} satisfies Tool['inputSchema'];

export function builtinTools(): Tool[] {
  const lookup: ToolAnnotations = {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  };
  return [
    {
      name: BUILTIN.operation_status,
      title: 'Operation status',
      description:
        'What the ledger knows about an operation: its last outcome as an envelope, with ' +
        'data { state, attempts, last_dispatch_state, observations }. Makes no remote call.',
      inputSchema: byId,
      outputSchema: outputSchema(),
      annotations: { ...lookup, title: 'Operation status' },
    },
    {
      name: BUILTIN.reconcile_operation,
      title: 'Reconcile operation',
      description:
        'Looks the operation up at its destination (a read) and records what was found. One match: ' +
        'succeeded with the record as data. Two or more: duplicate_effect (escalate). None: ' +
        'outcome_unknown, or a retry of the same request under the still-valid idempotency key ' +
        '(so this tool may send a write). Call this whenever a result says retry "reconcile_first".',
      inputSchema: byId,
      outputSchema: outputSchema(),
      // Not read-only: when the lookup finds nothing and the destination honours the idempotency key,
      // it resends the operation's own request, which may be a write of any class.
      annotations: {
        title: 'Reconcile operation',
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: false,
        openWorldHint: true,
      },
    },
    {
      name: BUILTIN.list_unresolved_operations,
      title: 'List unresolved operations',
      description:
        'Operations whose outcome is still open or unknown (for example after a cancelled call or a ' +
        'restart). Returns an envelope with category "succeeded", retry "never" and data ' +
        '{ operations: [{ operation_id, operation, state, category, retry, remote_effect, correlation_id }] }; ' +
        'handle each with operation_status or reconcile_operation.',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      outputSchema: outputSchema(),
      annotations: { ...lookup, title: 'List unresolved operations' },
    },
  ];
}
