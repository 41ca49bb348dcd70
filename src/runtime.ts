// `createRuntime`: the engine (src/engine) with its default transports — HTTP on undici and SSH
// on ssh2 (loaded on first use) — composed here, so the engine itself imports no transport.
// `transports` adds or replaces transports by kind; `lookup` and `ssh` configure the defaults.
import type { LookupFunction } from 'node:net';
import { systemClock } from './core/time.js';
import type { Transports } from './core/transport.js';
import {
  createEngine,
  UsageError,
  type EngineOptions,
  type RecoveryItem,
  type RunOptions,
  type Runtime,
} from './engine/runtime.js';
import { httpTransport } from './http/adapter.js';
import { sshTransport, type SshRuntimeOptions } from './ssh/adapter.js';

export { UsageError, type RecoveryItem, type RunOptions, type Runtime, type SshRuntimeOptions };

export interface RuntimeOptions extends Omit<EngineOptions, 'transports'> {
  /** Host name resolution for every HTTP request (tests resolve `.invalid` locally). */
  lookup?: LookupFunction;
  /** SSH host inventory and key resolution, for SSH actions. */
  ssh?: SshRuntimeOptions;
  /** Transports by kind, over the defaults (`http` on undici, `ssh` on ssh2). */
  transports?: Transports;
}

export function createRuntime(options: RuntimeOptions): Runtime {
  const { lookup, ssh, transports, ...engine } = options;
  const clock = options.clock ?? systemClock;
  return createEngine({
    ...engine,
    ...(ssh?.resolveSecret ? { resolveSshSecret: ssh.resolveSecret } : {}),
    transports: {
      http: httpTransport({ lookup, clock }),
      ssh: sshTransport(ssh, () => clock.now()),
      ...transports,
    },
  });
}
