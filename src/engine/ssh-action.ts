// SSH actions share the operation lifecycle of HTTP actions: the same write-ahead attempts,
// classification and ledger trail. Only dispatch and reconciliation differ (the remote marker
// wrapper instead of a lookup). The SSH driver is loaded lazily, never by the root entry.
import { z } from 'zod';
import type { Evidence } from '../core/evidence.js';
import type { ActionClass } from '../core/vocabulary.js';
import type { Inventory, ResolveKey } from '../ssh/inventory.js';
import type { MarkerState } from '../ssh/wrapper.js';
import { defineAction, type ActionDefinition } from './action.js';

export interface SshRuntimeOptions {
  inventory: Inventory;
  /** Resolves a host's `key_ref` to private key bytes, inside the runtime. */
  resolveKey: ResolveKey;
}

export interface SshActionSpec<I> {
  name: string;
  class: ActionClass;
  subject: string;
  input: z.ZodType<I>;
  host_ref: string;
  command(input: I): string;
  /** set_state: a command that exits 0 exactly when the desired state holds. */
  check?(input: I): string;
  deadline_ms?: number;
  attempt_budget?: number;
}

export interface SshDeclaration {
  host_ref: string;
  check?: (input: unknown) => string;
  deadline_ms: number;
}

const sshOutput = z.object({ exit_status: z.number().int(), stdout: z.string() });

export function defineSshAction<I>(
  spec: SshActionSpec<I>,
): ActionDefinition<I, z.output<typeof sshOutput>> {
  const ssh: SshDeclaration = {
    host_ref: spec.host_ref,
    deadline_ms: spec.deadline_ms ?? 60_000,
    ...(spec.check ? { check: (input: unknown) => spec.check!(input as I) } : {}),
  };
  return defineAction({
    name: spec.name,
    class: spec.class,
    subject: spec.subject,
    input: spec.input,
    // The command is the request: its fingerprint binds host and command, so a changed command is a
    // new operation, never a retry.
    request: (input) => ({ method: 'SSH', path: spec.command(input) }),
    response: sshOutput,
    destination: {
      origin: `ssh://${spec.host_ref}`,
      authority_ref: `ssh:${spec.host_ref}`,
      route_template: `${spec.host_ref}:${spec.name}`,
      ssh,
    },
    ...(spec.attempt_budget !== undefined ? { attempt_budget: spec.attempt_budget } : {}),
  });
}

export interface SshDispatched {
  evidence: Evidence;
  data: { exit_status: number; stdout: string } | null;
  diagnostics: Record<string, unknown>;
  phases: { started_at: number; request_sent_at?: number; finished_at: number };
}

async function host(options: SshRuntimeOptions | undefined, hostRef: string) {
  const { lookupHost } = await import('../ssh/inventory.js');
  return options ? lookupHost(options.inventory, hostRef) : undefined;
}

export async function dispatchSsh(
  options: SshRuntimeOptions | undefined,
  decl: SshDeclaration,
  command: string,
  family: ActionClass,
  operationId: string,
  input: unknown,
  signal: AbortSignal | undefined,
  now: () => number,
): Promise<SshDispatched> {
  const started_at = now();
  const entry = await host(options, decl.host_ref);
  if (!options || !entry) {
    return {
      evidence: {
        phase: 'not_sent',
        local_error: 'credential_unavailable',
        error_code: 'unknown_host_ref',
      },
      data: null,
      diagnostics: { problem: `no host "${decl.host_ref}" in the SSH inventory` },
      phases: { started_at, finished_at: now() },
    };
  }
  const { runSsh } = await import('../ssh/transport.js');
  const result = await runSsh({
    host: entry,
    command,
    operationId,
    family,
    resolveKey: options.resolveKey,
    deadlineMs: decl.deadline_ms,
    ...(decl.check ? { check: decl.check(input) } : {}),
    ...(signal ? { signal } : {}),
  });
  const exit = result.evidence.exit_status;
  return {
    evidence: result.evidence,
    data:
      typeof exit === 'number'
        ? { exit_status: exit, stdout: result.stdout.slice(0, 16_384) }
        : null,
    diagnostics: {
      wrapper: result.wrapper,
      stderr_excerpt: result.stderr.slice(0, 2048),
      ...(result.marker ? { marker: result.marker } : {}),
      ...(result.check_status !== undefined ? { check_status: result.check_status } : {}),
    },
    phases: { started_at, finished_at: now() },
  };
}

export type SshLookup =
  | { ok: true; marker: MarkerState; evidence: Evidence; stdout: string }
  | { ok: false; evidence: Evidence };

export async function lookupSshMarker(
  options: SshRuntimeOptions | undefined,
  decl: SshDeclaration,
  operationId: string,
): Promise<SshLookup> {
  const entry = await host(options, decl.host_ref);
  if (!options || !entry)
    return { ok: false, evidence: { phase: 'not_sent', local_error: 'credential_unavailable' } };
  const { reconcileSsh } = await import('../ssh/transport.js');
  const r = await reconcileSsh({ host: entry, operationId, resolveKey: options.resolveKey });
  if (!r.ok) return { ok: false, evidence: r.failure.lookup_evidence };
  return { ok: true, marker: r.value.marker, evidence: r.value.evidence, stdout: r.value.stdout };
}
