// Opens a LedgerStore from a ledger URL (DESIGN.md §6): `sqlite:PATH` (default
// `./.candor/ledger.db`), `memory:`, `postgres://…` / `postgresql://…` (optional `?schema=NAME`).
// The SQL adapters are loaded with dynamic import: importing this module, or the root entry,
// never loads a database driver.
import { resolve } from 'node:path';
import { errorText, LedgerError, type LedgerErrorCode } from './ledger-error.js';
import type { Durability, LedgerStore } from './store.js';

export const DEFAULT_LEDGER_URL = 'sqlite:./.candor/ledger.db';

export type LedgerLocation =
  | { kind: 'memory' }
  | { kind: 'sqlite'; path: string }
  | { kind: 'postgres'; url: string; schema: string | undefined };

export interface OpenLedgerOptions {
  durability?: Durability;
  /** Refuse to create a ledger that does not exist yet (read-only tools such as `ops list`). */
  mustExist?: boolean;
  /** Read only (implies mustExist): a SQLite file is opened read-only, so a read-only file works. */
  readOnly?: boolean;
  /** Base for relative SQLite paths. Default `process.cwd()`. */
  cwd?: string;
}

export type OpenLedgerResult =
  | { ok: true; value: LedgerStore; failure?: never }
  | { ok: false; failure: { code: LedgerErrorCode; message: string }; value?: never };

/** Parses a ledger URL; an unusable one is a BAD_URL failure. */
export function parseLedgerUrl(
  url: string,
  cwd: string = process.cwd(),
):
  | { ok: true; value: LedgerLocation }
  | { ok: false; failure: { code: 'BAD_URL'; message: string } } {
  if (url === 'memory:') return { ok: true, value: { kind: 'memory' } };
  if (url.startsWith('sqlite:')) {
    let path = url.slice('sqlite:'.length);
    if (path.startsWith('//')) path = path.slice(2);
    if (path.trim() === '')
      return {
        ok: false,
        failure: {
          code: 'BAD_URL',
          message: `ledger URL "${url}" names no file: use sqlite:PATH (default ${DEFAULT_LEDGER_URL})`,
        },
      };
    return { ok: true, value: { kind: 'sqlite', path: resolve(cwd, path) } };
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return {
        ok: false,
        failure: { code: 'BAD_URL', message: 'malformed PostgreSQL ledger URL' },
      };
    }
    const schema = parsed.searchParams.get('schema') ?? undefined;
    parsed.searchParams.delete('schema');
    return { ok: true, value: { kind: 'postgres', url: parsed.toString(), schema } };
  }
  return {
    ok: false,
    failure: {
      code: 'BAD_URL',
      message: `unknown ledger URL ${JSON.stringify(redact(url))}: use sqlite:PATH, memory: or postgres://…`,
    },
  };
}

export async function openLedger(
  url: string = DEFAULT_LEDGER_URL,
  options: OpenLedgerOptions = {},
): Promise<OpenLedgerResult> {
  const parsed = parseLedgerUrl(url, options.cwd);
  if (!parsed.ok) return parsed;
  const loc = parsed.value;
  const common = {
    ...(options.durability ? { durability: options.durability } : {}),
    ...(options.mustExist || options.readOnly ? { mustExist: true } : {}),
  };
  try {
    switch (loc.kind) {
      case 'memory': {
        const { openMemoryLedger } = await import('./memory/store.js');
        return { ok: true, value: openMemoryLedger() };
      }
      case 'sqlite': {
        const { openSqliteLedger } = await import('./sqlite/store.js');
        return {
          ok: true,
          value: openSqliteLedger(loc.path, {
            ...common,
            ...(options.readOnly ? { readOnly: true } : {}),
          }),
        };
      }
      case 'postgres': {
        const { openPostgresLedger } = await import('./postgres/store.js');
        const store = await openPostgresLedger(loc.url, {
          ...common,
          ...(loc.schema !== undefined ? { schema: loc.schema } : {}),
          // A reader (`ops`, `audit`) never writes the listing: it answers as it stands.
          ...(options.readOnly ? { projects: false } : {}),
        });
        return { ok: true, value: store };
      }
    }
  } catch (err) {
    if (err instanceof LedgerError) {
      return { ok: false, failure: { code: err.code, message: redact(err.message) } };
    }
    return { ok: false, failure: { code: 'OPEN_FAILED', message: redact(errorText(err)) } };
  }
}

/** Drops a password from any URL in a message: messages reach terminals and logs. */
function redact(text: string): string {
  return text.replace(/(\w+:\/\/[^:/@\s]+):[^@\s]*@/g, '$1:***@');
}
