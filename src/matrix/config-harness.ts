// A matrix on the user's own actions (`candor matrix run FILE --config candor.yaml`): the actions
// of the configuration, pointed at the OpenAPI fake (`--target fake`) or at the fault-injecting
// proxy in front of the real service (`--target proxy --upstream URL`), with a canary credential
// for every credential reference, and torn down again whatever happens.
import { randomBytes } from 'node:crypto';
import type { LoadedConfig } from '../config/load.js';
import { isHttpAction, type ActionDefinition } from '../engine/action.js';
import { lookupRefusingInvalid } from '../fakes/index.js';
import type { ApiModel } from '../fakes/openapi-doc.js';
import { startOpenApiFake, type OpenApiIdempotency } from '../fakes/openapi-fake.js';
import { startProxy, type ProxyService } from '../fakes/proxy.js';
import type { FakeService } from '../fakes/service.js';
import type { LedgerStore } from '../ledger/store.js';
import { configTarget } from './config-target.js';
import { matrixLedger, type HarnessResult } from './harness.js';
import { runMatrix, type MatrixRunOptions, type RowResult } from './runner.js';
import type { Matrix } from './spec.js';

export type ConfigTarget =
  | { kind: 'fake'; model: ApiModel; idempotency?: OpenApiIdempotency }
  | { kind: 'proxy'; upstream: string };

export interface ConfigRunOptions {
  config: LoadedConfig;
  target: ConfigTarget;
  ledgerUrl: string;
  ledger?: LedgerStore;
  onRow?: (r: RowResult, i: number, total: number) => void;
  filter?: MatrixRunOptions['filter'];
  classify?: MatrixRunOptions['classify'];
  /**
   * Rows at once (default 1). Only for a matrix whose rows share no state but the fake's, each
   * with its own correlation id and fault (a generated matrix against the fake); the CLI keeps
   * `--config` runs one at a time, since a real service behind the proxy may share more.
   */
  concurrency?: number;
  /** Called with the running service before the rows run (the report's idempotency probe). */
  beforeRows?: (service: FakeService, actions: ActionDefinition[]) => Promise<void>;
}

/** The configured actions, every destination pointed at `origin` (the fake or the proxy). */
export function pointedAt(config: LoadedConfig, origin: string): ActionDefinition[] {
  // Only HTTP actions run against the fake or the proxy (SSH actions have no origin).
  return config.actions
    .map((a) => a.definition)
    .filter(isHttpAction)
    .map((d) => ({ ...d, destination: { ...d.destination, origin } }));
}

export async function runMatrixOnConfig(
  matrix: Matrix,
  options: ConfigRunOptions,
): Promise<HarnessResult> {
  const held = await matrixLedger(options);
  if (!held.ok) return held;
  const { ledger, own: ownLedger } = held;
  const canary = `cnry_${randomBytes(12).toString('hex')}`;
  const clock = (): number => performance.timeOrigin + performance.now();
  let service: FakeService | ProxyService;
  try {
    service =
      options.target.kind === 'fake'
        ? await startOpenApiFake(options.target.model, {
            seed: matrix.seed,
            clock,
            ...(options.target.idempotency ? { idempotency_mode: options.target.idempotency } : {}),
          })
        : await startProxy({ upstream: options.target.upstream, clock });
  } catch (e) {
    if (ownLedger) await ledger.close();
    return { ok: false, failure: { message: e instanceof Error ? e.message : String(e) } };
  }
  try {
    const actions = pointedAt(options.config, service.url);
    const credentials: Record<string, Record<string, string>> = {};
    for (const a of actions)
      credentials[a.destination.authority_ref ?? 'none'] = { authorization: `Bearer ${canary}` };
    if (options.beforeRows) await options.beforeRows(service, actions);
    const report = await runMatrix(matrix, {
      ledger,
      fake: service,
      canary,
      lookup: lookupRefusingInvalid,
      actions,
      credentials,
      target: configTarget(new Map(actions.map((a) => [a.name, a]))),
      ...(options.onRow ? { onRow: options.onRow } : {}),
      ...(options.filter ? { filter: options.filter } : {}),
      ...(options.classify ? { classify: options.classify } : {}),
      ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
    });
    return { ok: true, value: report };
  } finally {
    await service.close();
    if (ownLedger) await ledger.close();
  }
}
