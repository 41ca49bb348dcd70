// The composition root: `candor serve` (and `startGateway` of the library), `candor recover`,
// `candor probe mcp` and `candor ui` open what they need through one `Composition`. Each step opens
// one thing and pushes its release on a stack; `close()` releases everything, newest first, once
// (a second call waits on the first). A step that fails unwinds what the earlier steps opened before
// the failure reaches the caller, so a failed start leaves no ledger handle, vault key, upstream
// child, telemetry exporter, timer or listener behind.
//
// `openConfigured` is the shared part of a configured command: the vault (its `vault:` references
// checked first: a problem in the file is reported before anything else opens), the ledger, the
// upstream MCP servers and OTLP telemetry. The runtime, the fleet sweep and the listener are steps
// the command adds on the same composition.
import type { Telemetry } from '../telemetry/port.js';
import type { OtlpTelemetry } from '../telemetry/otlp.js';
import type { LedgerStore } from '../ledger/store.js';
import { createRedactor, type Redactor } from '../core/redact.js';
import { openLedger } from '../ledger/open.js';
import type { Vault } from '../vault/index.js';
import type { LoadedConfig } from './load.js';
import type { ConfigIssue } from './locate.js';
import type { StartedUpstreams } from './upstreams.js';
import { openConfiguredVault } from './vault-open.js';

export interface OpenFailure {
  code: 'ledger' | 'vault' | 'listen' | 'config' | 'upstream' | 'telemetry';
  /** One line, as `candor serve` prints it. */
  message: string;
  /** Problems at a place in the configuration file (exit 2, one `FILE:LINE:COL` line each). */
  issues?: ConfigIssue[];
  /** The failing part's own words, without the prefix of `message` (other commands add theirs). */
  reason?: string;
  /** The ledger's failure code (`BAD_URL`, …) when the ledger could not be opened. */
  ledgerCode?: string;
}

/** A step that failed; `failure` says how, in the words the commands print. */
export class CompositionError extends Error {
  constructor(
    readonly step: string,
    readonly failure: OpenFailure,
    /** The error the step threw, when it was not a CompositionError. */
    override readonly cause?: unknown,
  ) {
    super(failure.message);
    this.name = 'CompositionError';
  }
}

/** The failure a step's unexpected error becomes, by the step that threw it. */
const CODE_OF_STEP: Readonly<Record<string, OpenFailure['code']>> = {
  vault: 'vault',
  ledger: 'ledger',
  upstreams: 'upstream',
  telemetry: 'telemetry',
  listen: 'listen',
};

export interface Composition {
  /**
   * One step: `make` opens something; `release`, when given, is pushed on the stack. When `make`
   * throws, everything opened so far is released and a CompositionError is thrown.
   */
  open<T>(step: string, make: () => T | Promise<T>, release?: (value: T) => unknown): Promise<T>;
  /** Registers a release without opening anything (an `open` step's second half). */
  defer(step: string, release: () => unknown): void;
  /** Releases everything opened, newest first; once; a release that fails is logged, not thrown. */
  close(): Promise<void>;
}

/**
 * Test seam (internal: exported from no entry point). `step` is called before every step of every
 * composition with its name; throwing there fails the start at that step. `opened` sees each
 * opened value.
 */
export const compositionHooks: {
  step: ((name: string) => void) | null;
  opened: ((name: string, value: unknown) => void) | null;
} = { step: null, opened: null };

export function composition(log: (line: string) => void = () => undefined): Composition {
  const stack: Array<{ step: string; release: () => unknown }> = [];
  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      for (let top = stack.pop(); top; top = stack.pop()) {
        try {
          await top.release();
        } catch (error) {
          log(
            `${top.step}: release failed: ${error instanceof Error ? error.message : String(error)}`,
          );
        }
      }
    })();
    return closing;
  };
  return {
    async open<T>(step: string, make: () => T | Promise<T>, release?: (value: T) => unknown) {
      let value: T;
      try {
        if (closing) throw new Error(`${step}: the composition is closed`);
        compositionHooks.step?.(step);
        value = await make();
      } catch (error) {
        await close();
        if (error instanceof CompositionError) throw error;
        const message = error instanceof Error ? error.message : String(error);
        throw new CompositionError(
          step,
          { code: CODE_OF_STEP[step] ?? 'config', message, reason: message },
          error,
        );
      }
      if (release) stack.push({ step, release: () => release(value) });
      // Closed while this step was opening: what it opened goes at once.
      if (closing) {
        await close();
        throw new CompositionError(step, {
          code: CODE_OF_STEP[step] ?? 'config',
          message: `${step}: stopped while starting`,
        });
      }
      compositionHooks.opened?.(step, value);
      return value;
    },
    defer(step, release) {
      stack.push({ step, release });
    },
    close,
  };
}

export interface OpenConfiguredOptions {
  loaded: LoadedConfig;
  /** Overrides the configuration's ledger URL. */
  ledgerUrl?: string;
  /** The ledger must exist already (`recover`): no new file is created. */
  mustExist?: boolean;
  /** What a `vault:` entry the vault lacks is: fatal (default) or handed to `onMissing`. */
  onMissingVaultEntries?: (issues: ConfigIssue[]) => void;
  /** Start the `upstreams:` (default: when the configuration names any). */
  upstreams?: boolean;
  /** Start OTLP telemetry (`telemetry.otlp`), with this service version. */
  telemetry?: { version?: string };
  /** Every secret is added to it; one is made when absent. */
  redactor?: Redactor;
  /** Lines for people (upstream logs, redacted). */
  log?: (line: string) => void;
}

export interface Configured {
  loaded: LoadedConfig;
  ledger: LedgerStore;
  ledgerUrl: string;
  vault: Vault | undefined;
  redactor: Redactor;
  upstreams: StartedUpstreams | undefined;
  otlp: OtlpTelemetry | null;
  telemetry: Telemetry | undefined;
}

/** The ledger at `url`, closed with the composition. */
export function openLedgerStep(
  c: Composition,
  url: string,
  options: { mustExist?: boolean } = {},
): Promise<LedgerStore> {
  return c.open(
    'ledger',
    async () => {
      const opened = await openLedger(url, options.mustExist ? { mustExist: true } : {});
      if (opened.ok) return opened.value;
      throw new CompositionError('ledger', {
        code: 'ledger',
        message: `ledger: ${opened.failure.message}`,
        reason: opened.failure.message,
        ledgerCode: opened.failure.code,
      });
    },
    (ledger) => ledger.close(),
  );
}

/** Vault, ledger, upstreams and telemetry of a configuration, in that order, on `c`. */
export async function openConfigured(
  c: Composition,
  options: OpenConfiguredOptions,
): Promise<Configured> {
  const { loaded } = options;
  const { config } = loaded;
  const redactor = options.redactor ?? createRedactor();
  const log = options.log ?? (() => undefined);
  const vault = await c.open(
    'vault',
    async () => {
      const opened = await openConfiguredVault(loaded, redactor, {
        missing: options.onMissingVaultEntries ? 'report' : 'fatal',
      });
      if (!opened.ok)
        throw new CompositionError('vault', {
          ...opened.failure,
          reason: opened.failure.message.replace(/^vault: /, ''),
        });
      if (opened.missing.length > 0) options.onMissingVaultEntries?.(opened.missing);
      return opened.vault;
    },
    // The key material goes with the composition, on a normal stop as on a failed start.
    (v) => v?.close(),
  );
  const ledgerUrl = options.ledgerUrl ?? config.ledger;
  const ledger = await openLedgerStep(c, ledgerUrl, { mustExist: options.mustExist === true });
  const wanted = options.upstreams ?? Object.keys(config.upstreams ?? {}).length > 0;
  const upstreams = wanted
    ? await c.open(
        'upstreams',
        async () => {
          // The MCP client is loaded only when `upstreams:` names a server.
          const { startUpstreams } = await import('./upstreams.js');
          const started = await startUpstreams(config, {
            ...(vault ? { vault } : {}),
            onSecret: (s) => void redactor.addSecret(s),
            log: (line) => log(redactor.redactString(line)),
          });
          if (started.ok) return started.value;
          throw new CompositionError('upstreams', {
            code: 'upstream',
            message: `${loaded.file}: ${started.message}`,
            reason: started.message,
          });
        },
        (u) => u?.close(),
      )
    : undefined;
  const otlpUrl = options.telemetry ? config.telemetry?.otlp : undefined;
  const otlp = otlpUrl
    ? await c.open(
        'telemetry',
        async () => {
          const { startOtlpTelemetry } = await import('../telemetry/otlp.js');
          return startOtlpTelemetry(otlpUrl, {
            ...(options.telemetry?.version ? { version: options.telemetry.version } : {}),
            ...(config.telemetry?.metrics_interval_ms !== undefined
              ? { metricsIntervalMs: config.telemetry.metrics_interval_ms }
              : {}),
          });
        },
        (o) => o.shutdown().catch(() => undefined),
      )
    : null;
  return {
    loaded,
    ledger,
    ledgerUrl,
    vault,
    redactor,
    upstreams,
    otlp,
    telemetry: otlp?.telemetry,
  };
}
