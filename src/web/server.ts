// `candor ui`: a read-only investigation view served by Candor itself (hono on node:http). Every
// request must carry the access token (query once, then an HttpOnly SameSite=Strict cookie), name
// an expected Host (no DNS rebinding) and, when it has an Origin, come from this origin. Only GET
// and HEAD exist — except on the approvals page (/approvals, approvals.ts), served when configured,
// which has its own sign-in instead of the token, may be reached by a link from elsewhere (a
// webhook message, the issuer's redirect) and accepts same-origin POSTs with a CSRF token. The ledger is read through the LedgerStore port and tailed for live updates
// (Server-Sent Events), so SQLite and PostgreSQL behave alike.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { hintsFor, type CommandHints } from './hints.js';
import { verifyStore } from '../ledger/chain/export.js';
import type { VerifyReport } from '../ledger/chain/verify.js';
import { projectOperation } from '../ledger/projection.js';
import type { LedgerStore } from '../ledger/store.js';
import { APP_CSS, APP_JS } from './assets.js';
import { ext, html, type Html } from './html.js';
import { page, type Section } from './layout.js';
import { CheckpointScan, LiveTail, type CheckpointSummary, type LiveEvent } from './live.js';
import { mountApprovals, type ApprovalsPageOptions } from './approvals.js';
import { auditBody, auditPending } from './pages/audit.js';
import { MATRIX_FILTERS, matrixBody, type MatrixFilter, type MatrixLoad } from './pages/matrix.js';
import { operationBody } from './pages/operation.js';
import { operationsBody, parseOpsQuery } from './pages/operations.js';
import { SESSION_CALL_LIMIT, sessionBody, sessionsListBody } from './pages/sessions.js';

export const TOKEN_COOKIE = 'candor_ui';

export interface UiOptions {
  store: LedgerStore;
  /** The ledger URL as shown to people (no password), used in the commands the pages print. */
  ledger: string;
  /**
   * How the person who started the view runs Candor and selected this ledger, for the commands the
   * pages print (web/hints.ts); absent: bare `candor` and `--ledger URL`.
   */
  commands?: CommandHints;
  /** The access token; a random one when omitted. */
  token?: string;
  matrix?: MatrixLoad | null;
  /** How often the ledger is read for new events. Default 300 ms. */
  pollMs?: number;
  /** `host:port` values a request's Host may name; filled in by `startUi` once the port is known. */
  hosts?: Iterable<string>;
  /** How `/audit` verifies the ledger (injected by tests to count runs). */
  verify?: (store: LedgerStore, opts: Record<string, never>) => Promise<VerifyReport>;
  /** The approvals page and its sign-in (`approvals.web` in candor.yaml); absent: not served. */
  approvals?: ApprovalsPageOptions | null;
}

/**
 * The audit page's verification: run in the background, at most one at a time, and cached by
 * ledger position (the last seq the view has read). A request for a position already verified (or
 * being verified) starts nothing.
 */
interface AuditResult {
  report: VerifyReport;
  checkpoints: CheckpointSummary[];
}

function backgroundAudit(verify: () => Promise<AuditResult>): {
  refresh(seq: number): void;
  latest(): ({ seq: number } & AuditResult) | null;
  runs(): number;
  idle(): Promise<void>;
} {
  let current: Promise<void> = Promise.resolve();
  let done: ({ seq: number } & AuditResult) | null = null;
  let running: number | null = null;
  let wanted: number | null = null;
  let runs = 0;
  const start = (seq: number): void => {
    running = seq;
    runs++;
    current = verify()
      .then((result) => {
        done = { seq, ...result };
      })
      .catch(() => undefined)
      .finally(() => {
        running = null;
        const next = wanted;
        wanted = null;
        if (next !== null && next !== done?.seq) start(next);
      });
  };
  return {
    refresh(seq) {
      if (done?.seq === seq || running === seq) return;
      if (running !== null) wanted = seq;
      else start(seq);
    },
    latest: () => done,
    runs: () => runs,
    idle: async () => {
      while (running !== null) await current;
    },
  };
}

/** A path on this view: never `//host` (a browser reads that as another site) or `/\\host`. */
export function ownPath(url: URL): string {
  return `/${url.pathname.replace(/^[/\\]+/, '')}${url.search}`;
}

/** Sessions listed on the sessions page and in the session filter (newest first). */
const SESSIONS_SHOWN = 500;

export interface UiApp {
  app: Hono;
  /** The view's position in the ledger (what the live stream has pushed up to). */
  tail: LiveTail;
  token: string;
  hosts: Set<string>;
  /**
   * Bound to every interface (0.0.0.0 or ::) on this port: a Host naming any address of this
   * machine's interfaces (as they are at the request) is expected too. Names are never admitted
   * this way, so a rebinding attacker's domain still gets 403.
   */
  allowInterfaceAddresses(port: number): void;
  /** Reads new ledger events into the index and pushes them to live pages. */
  poll(): Promise<LiveEvent[]>;
  /** How many whole-ledger verifications `/audit` has started (its cache works when this stays). */
  auditRuns(): number;
  /** Resolves once no background verification is running. */
  auditIdle(): Promise<void>;
  close(): Promise<void>;
}

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
  'cross-origin-resource-policy': 'same-origin',
};

function sameToken(given: string | undefined, token: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export async function createUi(options: UiOptions): Promise<UiApp> {
  const { store, ledger } = options;
  const hints = hintsFor(ledger, options.commands);
  const token = options.token ?? randomBytes(24).toString('base64url');
  const hosts = new Set(options.hosts ?? []);
  const index = await LiveTail.start(store);
  const checkpoints = new CheckpointScan();
  const listeners = new Set<(events: LiveEvent[]) => void>();
  const streams = new Set<SSEStreamingApi>();
  const audits = backgroundAudit(async () => ({
    report: await (options.verify ?? verifyStore)(store, {}),
    checkpoints: [...(await checkpoints.update(store))],
  }));
  let polling: Promise<LiveEvent[]> | null = null;
  let closed = false;
  let interfacePort: number | null = null;
  /** Ends the live streams' keep-alive waits at once when the view closes. */
  const wakers = new Set<() => void>();

  const poll = (): Promise<LiveEvent[]> => {
    // One read at a time: a slow ledger never stacks up overlapping reads.
    polling ??= index
      .catchUp(store)
      .then((events) => {
        if (events.length > 0) for (const l of listeners) l(events);
        return events;
      })
      .finally(() => {
        polling = null;
      });
    return polling;
  };
  const pollMs = options.pollMs ?? 300;
  let timer: NodeJS.Timeout | null = null;
  const tick = (): void => {
    timer = setTimeout(() => {
      poll()
        .catch(() => [])
        .finally(() => {
          if (!closed) tick();
        });
    }, pollMs);
    timer.unref();
  };
  tick();
  // A store that can tell (PostgreSQL LISTEN/NOTIFY) wakes the feed as soon as any gateway
  // commits; the timer stays as the fallback.
  const unwatch = store.watch
    ? await store.watch(() => void poll().catch(() => [])).catch(() => null)
    : null;

  // The audit page's first verification starts now, not on its first view.
  audits.refresh(index.lastSeq);

  const app = new Hono();
  app.use('*', async (c, next) => {
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) c.header(k, v);
    const host = c.req.header('host') ?? '';
    if (!hosts.has(host) && !(interfacePort !== null && interfaceHosts(interfacePort).has(host)))
      return c.text('403: unexpected Host header\n', 403);
    const path = new URL(c.req.url).pathname;
    // The approvals page checks its own sign-in, and every write's origin and CSRF token.
    if (
      options.approvals &&
      (path === '/approvals' || path.startsWith('/approvals/') || path === '/static/app.css')
    )
      return next();
    const origin = c.req.header('origin');
    if (origin !== undefined && origin !== `http://${host}`)
      return c.text('403: cross-origin request refused\n', 403);
    if (c.req.header('sec-fetch-site') === 'cross-site')
      return c.text('403: cross-site request refused\n', 403);
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
      c.header('allow', 'GET, HEAD');
      return c.text('405: this view is read-only\n', 405);
    }
    const url = new URL(c.req.url);
    const fromQuery = url.searchParams.get('token') ?? undefined;
    if (fromQuery !== undefined) {
      if (!sameToken(fromQuery, token)) return c.text('401: wrong access token\n', 401);
      // Move the token into a cookie and out of the address bar (history, screenshots).
      c.header('set-cookie', `${TOKEN_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Strict`);
      url.searchParams.delete('token');
      return c.redirect(ownPath(url), 303);
    }
    if (!sameToken(cookieValue(c.req.header('cookie'), TOKEN_COOKIE), token)) {
      return c.text(`401: this view needs the access token printed by \`${hints.cli} ui\`\n`, 401);
    }
    return next();
  });

  const render = (
    c: { html: (text: string, status: 200 | 404) => Response | Promise<Response> },
    section: Section,
    title: string,
    body: Html,
    status: 200 | 404 = 200,
  ): Response | Promise<Response> => c.html(page({ title, section, ledger, body }).text, status);

  if (options.approvals) mountApprovals(app, options.approvals);
  app.get('/static/app.css', (c) =>
    c.body(APP_CSS, 200, { 'content-type': 'text/css; charset=utf-8' }),
  );
  app.get('/static/app.js', (c) =>
    c.body(APP_JS, 200, { 'content-type': 'text/javascript; charset=utf-8' }),
  );
  app.get('/', async (c) => {
    const q = parseOpsQuery(new URL(c.req.url));
    // A view never takes the write lock to project another process's events (a gateway's next
    // append would wait for it): it shows the listing as it stands and how far it trails.
    const [result, facets] = await Promise.all([
      store.operations({ ...q.query, fresh: false }),
      store.facets(SESSIONS_SHOWN, { fresh: false }),
    ]);
    return render(c, 'operations', 'Operations', operationsBody(result, facets, q, index.lastSeq));
  });
  app.get('/op/:id', async (c) => {
    const id = c.req.param('id');
    const events = await store.query({ operation_id: id });
    const view = projectOperation(events);
    if (!view)
      return render(
        c,
        'operations',
        'Not found',
        html`<h1>No operation ${ext(id)}</h1>
          <p><a href="/">← Operations</a></p>`,
        404,
      );
    return render(c, 'operations', `Operation ${id}`, operationBody(view, events, hints));
  });
  app.get('/sessions', async (c) =>
    render(
      c,
      'sessions',
      'Sessions',
      sessionsListBody((await store.facets(SESSIONS_SHOWN)).sessions, SESSIONS_SHOWN),
    ),
  );
  app.get('/sessions/:id', async (c) => {
    const id = c.req.param('id');
    const views = [];
    let after: string | null = null;
    let more = false;
    // A session's calls in the order they were opened, a listing page at a time.
    while (views.length < SESSION_CALL_LIMIT) {
      const page: Awaited<ReturnType<LedgerStore['operations']>> = await store.operations({
        session_id: id,
        order: 'opened',
        limit: Math.min(500, SESSION_CALL_LIMIT - views.length),
        ...(after === null ? {} : { after }),
      });
      for (const o of page.rows) {
        const v = projectOperation(await store.query({ operation_id: o.operation_id }));
        if (v) views.push(v);
      }
      after = page.next;
      more = after !== null;
      if (after === null) break;
    }
    return render(c, 'sessions', `Session ${id}`, sessionBody(id, views, more));
  });
  app.get('/op/:id/events.json', async (c) => {
    // The whole of what the page shows cut: the operation's events, as text (never as markup).
    const events = await store.query({ operation_id: c.req.param('id') });
    if (events.length === 0) return c.text('404: no such operation\n', 404);
    return c.body(`${JSON.stringify(events, null, 2)}\n`, 200, {
      'content-type': 'text/plain; charset=utf-8',
    });
  });
  app.get('/audit', async (c) => {
    // Served from the verification done in the background for the current ledger position; a
    // page view never waits for a whole-chain verification.
    audits.refresh(index.lastSeq);
    const cached = audits.latest();
    return render(
      c,
      'audit',
      'Audit',
      cached
        ? auditBody(
            cached.report,
            cached.checkpoints,
            ledger,
            { verified_at_seq: cached.seq, current_seq: index.lastSeq },
            hints.cli,
          )
        : auditPending(index.lastSeq),
    );
  });
  app.get('/matrix', async (c) => {
    const show = c.req.query('show');
    const filter: MatrixFilter = (MATRIX_FILTERS as readonly string[]).includes(show ?? '')
      ? (show as MatrixFilter)
      : 'all';
    const known = new Set<string>();
    const matrix = options.matrix ?? null;
    const wanted = matrix?.ok
      ? matrix.value.report.rows.flatMap((r) => (r.operation_id ? [r.operation_id] : []))
      : [];
    for (let i = 0; i < wanted.length; i += 500) {
      const page = await store.operations({ operation_ids: wanted.slice(i, i + 500), limit: 500 });
      for (const r of page.rows) known.add(r.operation_id);
    }
    return render(
      c,
      'matrix',
      'Matrix report',
      matrixBody(matrix, filter, (id) => known.has(id), hints.cli),
    );
  });
  app.get('/events', (c) =>
    streamSSE(c, async (stream) => {
      streams.add(stream);
      const send = (events: LiveEvent[]): void => {
        void stream.writeSSE({
          event: 'ledger',
          data: JSON.stringify(events),
          id: String(events.at(-1)?.seq ?? 0),
        });
      };
      listeners.add(send);
      stream.onAbort(() => {
        listeners.delete(send);
        streams.delete(stream);
      });
      await stream.writeSSE({ event: 'hello', data: JSON.stringify({ seq: index.lastSeq }) });
      while (!stream.aborted && !closed) {
        // A ping every 15 s keeps proxies from closing the stream; closing the view wakes it now
        // (a pending 15 s timer would otherwise keep the process alive after Ctrl-C).
        await new Promise<void>((resolve) => {
          const wake = (): void => {
            clearTimeout(timer);
            wakers.delete(wake);
            resolve();
          };
          const timer = setTimeout(wake, 15_000);
          wakers.add(wake);
        });
        if (!stream.aborted && !closed) await stream.writeSSE({ event: 'ping', data: '' });
      }
      listeners.delete(send);
      streams.delete(stream);
    }),
  );
  app.notFound((c) =>
    render(
      c,
      'operations',
      'Not found',
      html`<h1>Not found</h1>
        <p><a href="/">← Operations</a></p>`,
      404,
    ),
  );
  app.onError((err, c) => c.text(`500: ${err.message.split('\n')[0] ?? 'error'}\n`, 500));

  return {
    app,
    tail: index,
    token,
    hosts,
    allowInterfaceAddresses(port) {
      interfacePort = port;
    },
    poll,
    auditRuns: () => audits.runs(),
    auditIdle: () => audits.idle(),
    async close() {
      closed = true;
      for (const wake of [...wakers]) wake();
      if (timer) clearTimeout(timer);
      await unwatch?.();
      for (const s of streams) await s.close().catch(() => undefined);
      await polling?.catch(() => undefined);
    },
  };
}

export interface StartedUi {
  url: string;
  /** The URL with the access token: what `candor ui` prints. */
  urlWithToken: string;
  ui: UiApp;
  close(): Promise<void>;
}

/** Addresses that bind every interface. */
const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]', '0:0:0:0:0:0:0:0']);

/** `address:port` for every address of this machine's interfaces (IPv6 in brackets, no zone). */
export function interfaceHosts(port: number): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      const address = a.address.split('%')[0]!;
      out.add(a.family === 'IPv6' ? `[${address}]:${port}` : `${address}:${port}`);
    }
  }
  return out;
}

/** Serves the view on `host:port` (port 0: any free one). */
export async function startUi(
  options: UiOptions & { host?: string; port?: number },
): Promise<StartedUi> {
  const host = options.host ?? '127.0.0.1';
  const ui = await createUi(options);
  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: ui.app.fetch, hostname: host, port: options.port ?? 0 }, () =>
      resolve(s),
    );
    s.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host;
  const wildcard = WILDCARD_HOSTS.has(host);
  for (const h of [
    shown,
    ...(host === '127.0.0.1' || host === '::1' || wildcard
      ? ['localhost', '127.0.0.1', '[::1]']
      : []),
  ])
    ui.hosts.add(`${h}:${port}`);
  if (wildcard) ui.allowInterfaceAddresses(port);
  const url = `http://${shown}:${port}/`;
  return {
    url,
    urlWithToken: `${url}?token=${ui.token}`,
    ui,
    async close() {
      // Stop accepting, end the live streams, then drop every connection a browser keeps open
      // (keep-alive sockets and the event stream), so Ctrl-C ends the view at once.
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      await ui.close();
      if ('closeAllConnections' in server) server.closeAllConnections();
      await stopped;
    },
  };
}
