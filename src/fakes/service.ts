// startFakeService: the fault-injecting fake HTTP/1.1 service on raw loopback sockets.
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { seededRandom } from '../core/time.js';
import { handleAdmin } from './admin.js';
import type { ApiContext } from './api.js';
import { TokenBook, type TokenSpec } from './auth.js';
import { Connection, type RequestHandler, type ServiceContext } from './connection.js';
import {
  FaultRegistry,
  parseFault,
  type ArmedFault,
  type BeforeBytesVariant,
  type FaultSpec,
} from './faults.js';
import { fixtureFault, type FixtureCase } from './fixtures.js';
import { IdempotencyStore } from './idempotency.js';
import {
  RESOURCE_KINDS,
  ResourceStore,
  type IdempotencyMode,
  type ResourceKindSpec,
} from './resources.js';
import { toJsonl, TruthLog, type TruthEvent } from './truth.js';
import { refusedUrl, startBlackhole, unresolvableUrl, type Blackhole } from './unreachable.js';

export interface FakeServiceOptions {
  /** Default 0 (any free port). */
  port?: number;
  /** Loopback only: `127.0.0.1` (default) or another 127.x.y.z address. */
  host?: string;
  /** Seeds generated values; the same seed and requests give the same state. Default 1. */
  seed?: number;
  /** Ground truth is also appended here as JSONL. */
  logFile?: string;
  /** Monotonic milliseconds for ground-truth `at`. Default performance.now. */
  clock?: () => number;
  /** Accepted bearer tokens. With none, the API needs no token. */
  tokens?: readonly TokenSpec[];
  /** Idempotency mode per route key (`payments`, `records/notes`), over the kind defaults. */
  idempotency?: Readonly<Record<string, IdempotencyMode>>;
  /** Resource kinds; default RESOURCE_KINDS. */
  kinds?: Readonly<Record<string, ResourceKindSpec>>;
  /** Fixture cases answered by request id (see fixtures.ts). */
  fixtures?: readonly FixtureCase[];
  /** Idle keep-alive sockets are closed after this long (announced as Keep-Alive). Default 5000. */
  keepAliveTimeoutMs?: number;
  /**
   * What answers requests instead of the reference API (the OpenAPI emulation, the proxy's
   * upstream); it gets the service's idempotency store and token book.
   */
  handler?: (api: ApiContext) => RequestHandler;
}

export interface FakeService {
  readonly url: string;
  readonly port: number;
  readonly host: string;
  /** Arms a fault; throws TypeError for an invalid spec (misuse). */
  arm(fault: FaultSpec): ArmedFault;
  disarm(id?: string): void;
  armed(): readonly ArmedFault[];
  /** Ground truth of one request id, or all of it, in `seq` order. */
  groundTruth(callId?: string): TruthEvent[];
  groundTruthJsonl(callId?: string): string;
  /** Resolves with the first ground-truth event `match` accepts, already logged or still to come. */
  whenTruth(match: (e: TruthEvent) => boolean): Promise<TruthEvent>;
  readonly resources: ResourceStore;
  readonly tokens: TokenBook;
  setIdempotency(routeKey: string, mode: IdempotencyMode): boolean;
  /** A URL that fails before any request byte leaves: see unreachable.ts. */
  unreachableUrl(variant: BeforeBytesVariant): Promise<string>;
  /** Forgets resources, keys, faults, in-memory truth and counters; re-arms fixtures; tokens reset to setup. */
  reset(): void;
  close(): Promise<void>;
}

const LOOPBACK = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

export async function startFakeService(options: FakeServiceOptions = {}): Promise<FakeService> {
  const host = options.host ?? '127.0.0.1';
  if (!LOOPBACK.test(host)) throw new TypeError(`the fake listens on loopback only, not ${host}`);
  const kinds: Readonly<Record<string, ResourceKindSpec>> = options.kinds ?? RESOURCE_KINDS;
  const now = options.clock ?? (() => performance.now());
  const truth = new TruthLog(now, options.logFile);
  const faults = new FaultRegistry();
  const resources = new ResourceStore(kinds, seededRandom(options.seed ?? 1));
  const tokens = new TokenBook(options.tokens);
  const keys = new IdempotencyStore();
  const modes = new Map<string, IdempotencyMode>(Object.entries(options.idempotency ?? {}));
  const connections = new Set<Connection>();
  const timers = new Set<NodeJS.Timeout>();
  const blackholes: Blackhole[] = [];
  let requestNo = 0;
  let anonNo = 0;
  let closed = false;

  const routeKnown = (routeKey: string): boolean => {
    const [kind = '', child] = routeKey.split('/');
    const spec = Object.hasOwn(kinds, kind) ? kinds[kind] : undefined;
    return spec !== undefined && (child === undefined || spec.children?.[child] !== undefined);
  };
  const api: ApiContext = {
    resources,
    tokens,
    keys,
    modeFor(routeKey) {
      const set = modes.get(routeKey);
      if (set !== undefined) return set;
      const [kind = '', child] = routeKey.split('/');
      const spec = Object.hasOwn(kinds, kind) ? kinds[kind] : undefined;
      return (
        (child === undefined ? spec?.idempotency : spec?.children?.[child]?.idempotency) ??
        'ignored'
      );
    },
  };
  const armFixtures = (): void => {
    for (const c of options.fixtures ?? []) {
      const f = fixtureFault(c);
      if (f !== undefined) faults.arm(f);
    }
  };
  armFixtures();

  const service: Omit<FakeService, 'url' | 'port' | 'host' | 'close'> = {
    arm(spec) {
      const parsed = parseFault(spec);
      if (!parsed.ok) throw new TypeError(`invalid fault: ${parsed.failure.message}`);
      return faults.arm(parsed.value);
    },
    disarm: (id) => faults.disarm(id),
    armed: () => faults.list(),
    groundTruth: (callId) => truth.query(callId),
    groundTruthJsonl: (callId) => toJsonl(truth.query(callId)),
    whenTruth: (match) => truth.when(match),
    resources,
    tokens,
    setIdempotency(routeKey, mode) {
      if (!routeKnown(routeKey)) return false;
      modes.set(routeKey, mode);
      return true;
    },
    async unreachableUrl(variant) {
      if (variant === 'refused') return refusedUrl();
      if (variant === 'unresolvable') return unresolvableUrl(port);
      const hole = await startBlackhole();
      blackholes.push(hole);
      return hole.url;
    },
    reset() {
      resources.reset();
      keys.clear();
      faults.disarm();
      truth.clear();
      tokens.clear();
      for (const t of options.tokens ?? []) tokens.add(t);
      modes.clear();
      for (const [k, v] of Object.entries(options.idempotency ?? {})) modes.set(k, v);
      requestNo = 0;
      anonNo = 0;
      armFixtures();
    },
  };

  const handler = options.handler?.(api);
  const ctx: ServiceContext = {
    ...(handler ? { handler } : {}),
    now,
    truth,
    faults,
    api,
    keepAliveTimeoutMs: options.keepAliveTimeoutMs ?? 5000,
    nextRequestNo: () => ++requestNo,
    nextAnonId: () => `anon-${String(++anonNo).padStart(4, '0')}`,
    admin: (req) =>
      handleAdmin(
        {
          ...service,
          faults,
          truth,
          unreachableUrl: (v) =>
            v === 'refused' || v === 'unresolvable' || v === 'blackhole'
              ? service.unreachableUrl(v)
              : Promise.resolve(undefined),
        },
        req,
      ),
    later(ms, fn) {
      const t = setTimeout(() => {
        timers.delete(t);
        fn();
      }, ms);
      timers.add(t);
    },
  };

  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    const conn = new Connection(socket, ctx);
    connections.add(conn);
    socket.once('close', () => connections.delete(conn));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port: options.port ?? 0 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;

  return {
    ...service,
    url: `http://${host}:${port}`,
    port,
    host,
    async close() {
      if (closed) return;
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const c of connections) c.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all(blackholes.splice(0).map((b) => b.close()));
      truth.close();
    },
  };
}
