// The page shell: navigation, the ledger being shown, and the live status the script fills in.
import { html, type Html, type Part } from './html.js';

export type Section = 'operations' | 'sessions' | 'audit' | 'matrix';

const NAV: readonly [Section, string, string][] = [
  ['operations', '/', 'Operations'],
  ['sessions', '/sessions', 'Sessions'],
  ['audit', '/audit', 'Audit'],
  ['matrix', '/matrix', 'Matrix report'],
];

export function page(opts: { title: string; section: Section; ledger: string; body: Part }): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        <title>${opts.title} · Candor</title>
        <link rel="stylesheet" href="/static/app.css" />
      </head>
      <body>
        <header class="top">
          <a class="brand" href="/">Candor</a>
          <nav aria-label="Sections">
            ${NAV.map(
              ([id, href, label]) =>
                html`<a href="${href}" ${id === opts.section ? html` aria-current="page"` : ''}
                  >${label}</a
                >`,
            )}
          </nav>
          <span class="ledger">ledger <code>${opts.ledger}</code></span>
          <span id="live-status" role="status">static</span>
        </header>
        <main>${opts.body}</main>
        <script src="/static/app.js"></script>
      </body>
    </html>`;
}

export const stateBadge = (state: string | null): Html =>
  html`<span class="badge s-${state ?? 'none'}">${state ?? 'no state'}</span>`;
