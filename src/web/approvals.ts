// The approvals page of `candor ui` (/approvals), behind its own sign-in (approver-signin.ts):
// pending approval requests from the gateway's queue (src/approvals/approvers/queue.ts), each
// showing the exact request the engine will send, and a form to approve or deny it with a reason.
//
// Contracts:
// - Every write (sign-in with a token, decide, sign-out) is a POST that must come from this origin:
//   an `Origin` naming this view and, when the browser says, `Sec-Fetch-Site: same-origin`; the
//   decision form also carries the session's CSRF token. Anything else is 403 and decides nothing.
// - A decision is bound to the request the approver saw: the form carries the card's request
//   fingerprint, and the queue refuses it when that is not the card's.
// - Under `four_eyes`, the caller that asked for a call cannot approve it: refused (403) and shown.
// - The approver's identity (subject and issuer, or token name) and reason are recorded with the
//   decision, and from there by the gate in `approval_decided`.
import type { Context, Hono } from 'hono';
import { approverLabel } from '../approvals/identity.js';
import type { ApprovalCard } from '../approvals/card.js';
import type { ApprovalQueue } from '../approvals/approvers/queue.js';
import { html, type Html, type Part } from './html.js';
import { sameSecret, type ApproverSession, type ApproverSignIn } from './approver-signin.js';

export const APPROVER_COOKIE = 'candor_approver';
export const LOGIN_COOKIE = 'candor_approver_login';
const MAX_REASON = 1_000;

export interface ApprovalsPageOptions {
  queue: ApprovalQueue;
  signIn: ApproverSignIn;
  four_eyes: boolean;
  /** The callback registered at the issuer; default this view's origin + /approvals/callback. */
  redirect_uri?: string;
  now?: () => number;
}

function cookie(c: Context, name: string): string | undefined {
  for (const part of (c.req.header('cookie') ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

const origin = (c: Context): string => `http://${c.req.header('host') ?? ''}`;

function setCookie(c: Context, name: string, value: string, maxAge: number): void {
  // Lax: sent on the top-level navigation back from the issuer, never on a cross-site POST.
  c.header(
    'set-cookie',
    `${name}=${value}; Path=/approvals; HttpOnly; SameSite=Lax; Max-Age=${maxAge}`,
    { append: true },
  );
}

/** A write must come from this view's own pages. */
function crossSite(c: Context): string | null {
  const o = c.req.header('origin');
  if (o === undefined || o === 'null' || o !== origin(c))
    return 'a write must come from this page (Origin)';
  const site = c.req.header('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin')
    return 'a write must come from this page (Sec-Fetch-Site)';
  return null;
}

function shell(title: string, who: ApproverSession | null, body: Part): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · Candor approvals</title>
        <link rel="stylesheet" href="/static/app.css" />
      </head>
      <body>
        <header class="top">
          <a class="brand" href="/approvals">Candor approvals</a>
          ${
            who
              ? html`<span class="ledger" id="approver"
                    >signed in as
                    <strong>${who.identity.subject}</strong>
                    ${who.identity.issuer ? html`(${who.identity.issuer})` : '(approver token)'}</span
                  >
                  <form method="post" action="/approvals/logout">
                    <input type="hidden" name="csrf" value="${who.csrf}" />
                    <button type="submit">Sign out</button>
                  </form>`
              : ''
          }
        </header>
        <main>${body}</main>
      </body>
    </html>`;
}

function signInBody(signIn: ApproverSignIn, problem: string | null): Html {
  return html`<h1>Sign in to approve</h1>
    ${problem ? html`<p class="problem" role="alert">${problem}</p>` : ''}
    ${
      signIn.oidc
        ? html`<p>
            <a class="button" id="sign-in" href="/approvals/login"
              >Sign in with your organisation</a
            >
          </p>`
        : ''
    }
    ${
      signIn.tokens
        ? html`<form method="post" action="/approvals/login/token">
            <label for="approver-token">Approver token</label>
            <input id="approver-token" name="token" type="password" required autocomplete="off" />
            <button type="submit">Sign in</button>
          </form>`
        : ''
    }`;
}

/** Exactly what will be sent: the request line, the headers, the body bytes. */
export function requestBlock(card: ApprovalCard): Html {
  const r = card.request;
  if (!r) return html`<p class="muted">The engine did not describe this request.</p>`;
  const url = r.method === 'SSH' ? `${r.destination}: ${r.target}` : `${r.destination}${r.target}`;
  const headers = Object.entries(r.headers ?? {});
  const body = r.body === null || r.body === undefined ? null : JSON.stringify(r.body);
  return html`<dl class="request">
    <dt>Method</dt>
    <dd class="mono req-method">${r.method}</dd>
    <dt>URL</dt>
    <dd class="mono req-url">${url}</dd>
    ${
      headers.length > 0 || r.credential
        ? html`<dt>Headers</dt>
            <dd>
              <pre class="mono req-headers">
${headers.map(([k, v]) => `${k}: ${v}\n`).join('')}${
                  r.credential
                    ? `authorization: [credential ${r.credential}, added when sent]\n`
                    : ''
                }</pre>
            </dd>`
        : ''
    }
    <dt>Body</dt>
    <dd>
      ${body === null ? html`<span class="muted">none</span>` : html`<pre class="mono req-body">${body}</pre>`}
    </dd>
  </dl>`;
}

function cardBody(card: ApprovalCard, who: ApproverSession, now: number, fourEyes: boolean): Html {
  const by = card.requested_by;
  const left = Math.max(0, Math.round((card.expires_at - now) / 1000));
  return html`<section
    class="approval"
    id="approval-${card.approval_id}"
    aria-labelledby="q-${card.approval_id}"
  >
    <h2 id="q-${card.approval_id}">${card.question}</h2>
    <p>
      <span class="mono">${card.action}</span> (${card.action_class}) · operation
      <span class="mono">${card.operation_id}</span> · ${card.scope} · expires in ${left}s
    </p>
    <p class="requested-by">
      Asked by
      ${
        by
          ? html`<strong>${by.subject}</strong>${by.issuer ? html` (${by.issuer})` : ''}${
                by.client_id ? html` via client ${by.client_id}` : ''
              }`
          : html`<em>an unrecorded caller</em>`
      }
      — ${card.requested_via === 'person' ? 'a person' : 'an agent'}
      ${fourEyes ? html` · four-eyes rule: the caller cannot approve its own call` : ''}
    </p>
    ${requestBlock(card)}
    <p class="mono muted">request fingerprint ${card.request_fingerprint}</p>
    <form method="post" action="/approvals/${card.approval_id}/decide" class="decide">
      <input type="hidden" name="csrf" value="${who.csrf}" />
      <input type="hidden" name="request_fingerprint" value="${card.request_fingerprint}" />
      <label for="reason-${card.approval_id}">Reason</label>
      <input id="reason-${card.approval_id}" name="reason" required maxlength="${MAX_REASON}" />
      <button type="submit" name="decision" value="approve">Approve</button>
      <button type="submit" name="decision" value="deny">Deny</button>
    </form>
  </section>`;
}

/** Mounts /approvals/* on the view's app; the view's own token is not needed there. */
export function mountApprovals(app: Hono, options: ApprovalsPageOptions): void {
  const { queue, signIn } = options;
  const now = options.now ?? Date.now;
  const redirectUri = (c: Context): string =>
    options.redirect_uri ?? `${origin(c)}/approvals/callback`;
  const who = (c: Context): ApproverSession | null => signIn.session(cookie(c, APPROVER_COOKIE));
  const page = (c: Context, title: string, s: ApproverSession | null, body: Part, status = 200) =>
    c.html(shell(title, s, body).text, status as 200);

  // The forms' POSTs must carry their Origin: a `no-referrer` policy (the rest of the view) makes
  // browsers send `Origin: null`, which the write check refuses.
  const sameOriginReferrer = async (c: Context, next: () => Promise<void>): Promise<void> => {
    await next();
    c.res.headers.set('referrer-policy', 'same-origin');
  };
  app.use('/approvals', sameOriginReferrer);
  app.use('/approvals/*', sameOriginReferrer);

  app.get('/approvals', async (c) => {
    const s = who(c);
    if (!s) return page(c, 'Sign in', null, signInBody(signIn, null), 401);
    const cards = await queue.pending(now());
    return page(
      c,
      'Pending approvals',
      s,
      html`<h1>Pending approvals (${cards.length})</h1>
        ${
          cards.length === 0
            ? html`<p class="muted" id="none-pending">Nothing is waiting for a decision.</p>`
            : cards.map((card) => cardBody(card, s, now(), options.four_eyes))
        }`,
    );
  });

  app.get('/approvals/login', async (c) => {
    if (!signIn.oidc) return c.redirect('/approvals', 303);
    const { location, state } = await signIn.begin(redirectUri(c));
    setCookie(c, LOGIN_COOKIE, state, 600);
    return c.redirect(location, 303);
  });

  app.get('/approvals/callback', async (c) => {
    const result = await signIn.finish(
      new URL(c.req.url).searchParams,
      cookie(c, LOGIN_COOKIE),
      redirectUri(c),
    );
    setCookie(c, LOGIN_COOKIE, '', 0);
    if (!result.ok) return page(c, 'Sign in', null, signInBody(signIn, result.failure), 403);
    setCookie(c, APPROVER_COOKIE, result.value.id, 8 * 3600);
    return c.redirect('/approvals', 303);
  });

  app.post('/approvals/login/token', async (c) => {
    const refused = crossSite(c);
    if (refused) return c.text(`403: ${refused}; nothing was done\n`, 403);
    const form = await c.req.parseBody();
    const token = typeof form['token'] === 'string' ? form['token'] : '';
    const result = signIn.withToken(token);
    if (!result.ok) return page(c, 'Sign in', null, signInBody(signIn, result.failure), 403);
    setCookie(c, APPROVER_COOKIE, result.value.id, 8 * 3600);
    return c.redirect('/approvals', 303);
  });

  app.post('/approvals/logout', async (c) => {
    const refused = crossSite(c);
    if (refused) return c.text(`403: ${refused}; nothing was done\n`, 403);
    const s = who(c);
    const form = await c.req.parseBody();
    if (s && sameSecret(typeof form['csrf'] === 'string' ? form['csrf'] : undefined, s.csrf))
      signIn.end(s.id);
    setCookie(c, APPROVER_COOKIE, '', 0);
    return c.redirect('/approvals', 303);
  });

  app.post('/approvals/:id/decide', async (c) => {
    // Origin first: a cross-site form is refused before anything else is read.
    const refused = crossSite(c);
    if (refused) return c.text(`403: ${refused}; nothing was decided\n`, 403);
    const s = who(c);
    if (!s) return page(c, 'Sign in', null, signInBody(signIn, 'Sign in again to decide.'), 401);
    const form = await c.req.parseBody();
    const field = (k: string): string | undefined =>
      typeof form[k] === 'string' ? form[k] : undefined;
    if (!sameSecret(field('csrf'), s.csrf))
      return c.text(
        '403: the form is not from this session (CSRF token); nothing was decided\n',
        403,
      );
    const decision = field('decision');
    const reason = (field('reason') ?? '').trim();
    const fingerprint = field('request_fingerprint');
    const back = html`<p><a href="/approvals">← Pending approvals</a></p>`;
    if ((decision !== 'approve' && decision !== 'deny') || fingerprint === undefined)
      return page(
        c,
        'Not decided',
        s,
        html`<p role="alert">The form is incomplete; nothing was decided.</p>
          ${back}`,
        400,
      );
    if (reason.length === 0 || reason.length > MAX_REASON)
      return page(
        c,
        'Not decided',
        s,
        html`<p role="alert" class="problem">
            A reason (1-${MAX_REASON} characters) is required; nothing was decided.
          </p>
          ${back}`,
        400,
      );
    const result = await queue.decide(
      c.req.param('id'),
      decision === 'approve' ? 'approved' : 'denied',
      approverLabel(s.identity),
      now(),
      {
        identity: s.identity,
        reason,
        request_fingerprint: fingerprint,
        four_eyes: options.four_eyes,
      },
    );
    if (!result.ok) {
      const status =
        result.failure.code === 'self_approval'
          ? 403
          : result.failure.code === 'not_found'
            ? 404
            : 409;
      return page(
        c,
        'Refused',
        s,
        html`<h1>Refused</h1>
          <p role="alert" class="problem" id="refusal" data-code="${result.failure.code}">
            ${result.failure.message}
          </p>
          ${back}`,
        status,
      );
    }
    const card = result.value.card;
    return page(
      c,
      decision === 'approve' ? 'Approved' : 'Denied',
      s,
      html`<h1 id="decided">${decision === 'approve' ? 'Approved' : 'Denied'}</h1>
        <p>
          ${card.action} for operation <span class="mono">${card.operation_id}</span>, request
          <span class="mono">${card.request_fingerprint}</span>, by ${s.identity.subject}:
          “${reason}”.
        </p>
        ${back}`,
    );
  });
}
