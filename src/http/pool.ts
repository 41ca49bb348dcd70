// A runtime's HTTP connections. Each connection is an undici `Client` with one socket and no
// pipelining, so the pool knows, per connection, when it last answered and what keep-alive time
// the server announced — the two facts that decide whether a write may use it:
//
// - `any`: reads, lookups and writes under an honoured idempotency key may take any idle
//   connection. If it turns out stale (the server closed it as the request went out), the reset
//   is `outcome_unknown` and the engine's licence retries it — a read, or the same key.
// - `recent`: other writes take an idle connection only if it answered within a short window well
//   below the keep-alive time the server announced (`Keep-Alive: timeout=N`). The stale-socket
//   race happens when a server's idle timer fires as the request arrives; within the window it
//   cannot have fired. A server that announces no keep-alive time gets a fresh connection.
//
// Fresh connections share one TLS session cache per pool, so they resume the TLS session
// instead of a full handshake.
import type { LookupFunction } from 'node:net';
import { buildConnector, Client } from 'undici';
import type { HttpTimeouts } from '../core/transport.js';

export type Reuse = 'any' | 'recent';

/** The longest a `recent` write waits after a connection's last answer, whatever the hint. */
export const RECENT_WINDOW_MAX_MS = 1_000;
/** The share of the server's keep-alive time a `recent` write may use. */
export const RECENT_WINDOW_SHARE = 0.25;
/** Idle connections kept per destination and timeout profile. */
const MAX_IDLE = 32;
/** How long an idle connection is kept when the server announced no keep-alive time. */
const DEFAULT_IDLE_MS = 4_000;

export interface Lease {
  readonly client: Client;
  /** The exchange completed on a connection the server keeps open: it goes back to the pool. */
  release(responseHeaders: Record<string, string>): void;
  /** Anything else: the connection is closed. */
  discard(): Promise<void>;
}

export interface HttpPool {
  acquire(origin: string, t: HttpTimeouts, lookup: LookupFunction | undefined, reuse: Reuse): Lease;
  /** Closes every connection; later requests open fresh ones (and are closed after use). */
  close(): Promise<void>;
}

interface Idle {
  client: Client;
  answeredAt: number;
  /** The server's announced keep-alive time, or null. */
  hintMs: number | null;
}

/** `maxIdle: 0` keeps nothing (every request gets its own connection). */
export function createHttpPool(options: { maxIdle?: number; now?: () => number } = {}): HttpPool {
  const maxIdle = options.maxIdle ?? MAX_IDLE;
  const now = options.now ?? (() => performance.now());
  const idle = new Map<string, Idle[]>();
  const connectors = new Map<string, buildConnector.connector>();
  const lookupIds = new WeakMap<LookupFunction, number>();
  let closed = false;

  const keyOf = (origin: string, t: HttpTimeouts, lookup: LookupFunction | undefined): string => {
    let id = 0;
    if (lookup)
      id = lookupIds.get(lookup) ?? lookupIds.set(lookup, connectors.size + 1).get(lookup)!;
    return `${origin}|${t.connect_ms}|${t.first_byte_ms}|${t.body_idle_ms}|${id}`;
  };

  const connectorFor = (t: HttpTimeouts, lookup: LookupFunction | undefined, key: string) => {
    const ck = key.slice(key.indexOf('|') + 1);
    let c = connectors.get(ck);
    if (!c) {
      // One session cache for every connection with this profile: TLS resumption across them.
      c = buildConnector({
        timeout: t.connect_ms,
        maxCachedSessions: 100,
        ...(lookup ? { lookup } : {}),
      });
      connectors.set(ck, c);
    }
    return c;
  };

  const take = (key: string, reuse: Reuse): Client | null => {
    const list = idle.get(key);
    if (!list) return null;
    const at = now();
    // Most recently answered first; anything past its keep-alive time is closed on the way.
    while (list.length > 0) {
      const e = list.pop()!;
      const age = at - e.answeredAt;
      // Never up to the server's own limit: it closes the connection then, maybe as we send.
      const keep =
        e.hintMs === null ? DEFAULT_IDLE_MS : Math.min(e.hintMs - 1_000, e.hintMs * 0.75);
      if (age >= keep || e.client.destroyed || e.client.closed) {
        void e.client.destroy().catch(() => undefined);
        continue;
      }
      if (reuse === 'any') return e.client;
      // No announced keep-alive time, no window: nothing says the server still keeps it.
      if (
        e.hintMs !== null &&
        age <= Math.min(RECENT_WINDOW_MAX_MS, e.hintMs * RECENT_WINDOW_SHARE)
      )
        return e.client;
      // Older than a write may trust: keep it for reads, open a fresh connection for this write.
      list.push(e);
      return null;
    }
    return null;
  };

  return {
    acquire(origin, t, lookup, reuse) {
      const key = keyOf(origin, t, lookup);
      const client =
        (!closed && maxIdle > 0 ? take(key, reuse) : null) ??
        new Client(origin, {
          connect: connectorFor(t, lookup, key),
          headersTimeout: t.first_byte_ms,
          bodyTimeout: t.body_idle_ms,
          pipelining: 1,
        });
      let settled = false;
      return {
        client,
        release(headers) {
          if (settled) return;
          settled = true;
          const connection = (headers['connection'] ?? '').toLowerCase();
          const hintMs = keepAliveMs(headers['keep-alive']);
          // After a write of the `recent` kind, a server that announced no keep-alive time keeps
          // nothing we could trust: the connection is closed, as it was opened, for this write.
          if (
            closed ||
            maxIdle === 0 ||
            connection.includes('close') ||
            (reuse === 'recent' && hintMs === null)
          ) {
            void client.destroy().catch(() => undefined);
            return;
          }
          const list = idle.get(key) ?? [];
          idle.set(key, list);
          list.push({ client, answeredAt: now(), hintMs });
          if (list.length > maxIdle)
            void list
              .shift()!
              .client.destroy()
              .catch(() => undefined);
        },
        async discard() {
          if (settled) return;
          settled = true;
          await client.destroy().catch(() => undefined);
        },
      };
    },
    async close() {
      closed = true;
      const all = [...idle.values()].flat();
      idle.clear();
      await Promise.all(all.map((e) => e.client.destroy().catch(() => undefined)));
    },
  };
}

/** `Keep-Alive: timeout=N` (seconds) in ms, or null when the server announced none. */
export function keepAliveMs(header: string | undefined): number | null {
  if (header === undefined) return null;
  const m = /(?:^|[\s,;])timeout\s*=\s*(\d+)/i.exec(header);
  if (!m) return null;
  const s = Number(m[1]);
  return Number.isFinite(s) && s > 0 ? s * 1000 : null;
}
