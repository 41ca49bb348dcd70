// Lock sources for the gate. The gate asks `isLocked()` before every attempt and records each
// change it observes as a `gate_changed` ledger event (see gate.ts).
//
// Two sources:
// - the vault (preferred when a vault is configured): `candor vault lock|unlock` flips the vault's
//   gate; `vaultLock(vault)` reads it through `checkGate()`, which re-reads the file, so a lock from
//   another process takes effect on the next check. Only the vault's `locked` answer counts as
//   locked; other vault failures surface as credential failures with their own category.
// - a lock file (no vault): `<dir>/LOCKED` exists ⇒ locked. `candor approve lock|unlock` writes and
//   removes it. Anything but "file absent" (e.g. a permission error) counts as locked: fail closed.
//   The gate asks before every attempt, so the answer is cached against the folder's own stat
//   (inode, mtime, ctime in ns): creating or removing LOCKED changes the folder, and the file is
//   read again only then — one `stat` per check instead of a failing read. A folder changed within
//   the last RACY_MS is not trusted (coarse file-system clocks) and read every time; a folder whose
//   stat fails (other than absent) throws, which the gate counts as locked.
import { statSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export interface LockSource {
  /** Names the source in `gate_changed.by` for observed transitions, e.g. `vault`. */
  readonly name: string;
  isLocked(): Promise<boolean>;
  /** Who set the current lock, when the source knows (recorded in `gate_changed.by`). */
  holder?(): Promise<{ by: string } | null>;
}

/** Structural subset of the vault used here (keeps approvals independent of vault internals). */
export interface VaultGate {
  checkGate(): Promise<{ ok: true } | { ok: false; failure: { code: string } }>;
}

export function vaultLock(vault: VaultGate): LockSource {
  return {
    name: 'vault',
    async isLocked() {
      const r = await vault.checkGate();
      return !r.ok && r.failure.code === 'locked';
    },
  };
}

/**
 * Locked when any source is locked (`candor approve lock` and `candor vault lock` both hold): the
 * first locked source names the transition. A source that cannot be read counts as locked.
 */
export function anyLock(...sources: LockSource[]): LockSource {
  let lockedBy: LockSource | null = null;
  return {
    // The source that holds the lock names it, as if it were the only one.
    get name() {
      return lockedBy?.name ?? sources.map((s) => s.name).join('+');
    },
    async isLocked() {
      lockedBy = null;
      for (const s of sources) {
        let locked: boolean;
        try {
          locked = await s.isLocked();
        } catch {
          locked = true;
        }
        if (locked) {
          lockedBy = s;
          return true;
        }
      }
      return false;
    },
    async holder() {
      return lockedBy?.holder ? lockedBy.holder() : null;
    },
  };
}

export const DEFAULT_APPROVALS_DIR = '.candor/approvals';
export const LOCK_FILE_NAME = 'LOCKED';

export interface LockFile extends LockSource {
  readonly path: string;
  /** Creates the lock file; `changed` is false when it was already locked. */
  lock(by: string, at: number): Promise<{ changed: boolean }>;
  unlock(): Promise<{ changed: boolean; by: string | null }>;
  /** Who locked it and when, or null when unlocked. */
  holder(): Promise<{ by: string; at: number } | null>;
}

/** A folder changed less than this long ago may change again within its timestamp's tick. */
export const RACY_MS = 2_000;

export function lockFile(
  dir: string = DEFAULT_APPROVALS_DIR,
  /** Injected for tests that count reads. */
  read: (path: string) => Promise<string> = (p) => readFile(p, 'utf8'),
): LockFile {
  const path = join(dir, LOCK_FILE_NAME);
  const holder = async (): Promise<{ by: string; at: number } | null> => {
    try {
      const parsed = JSON.parse(await read(path)) as { by?: unknown; at?: unknown };
      return {
        by: typeof parsed.by === 'string' ? parsed.by : 'unknown',
        at: typeof parsed.at === 'number' ? parsed.at : 0,
      };
    } catch (err) {
      if (isCode(err, 'ENOENT')) return null;
      // Present but unreadable or not JSON: still a lock.
      return { by: 'unknown', at: 0 };
    }
  };
  let cached: { stamp: string; locked: boolean } | null = null;
  return {
    name: 'lock_file',
    path,
    holder,
    async isLocked() {
      // No folder, no lock file: nothing to read. Only "does not exist" means unlocked: a path
      // through a file (ENOTDIR, which Node 22+ folds into throwIfNoEntry: false) or a folder it
      // may not examine throws, and the gate then fails closed.
      let folder;
      try {
        folder = statSync(dir, { bigint: true });
      } catch (err) {
        if (!isCode(err, 'ENOENT')) throw err;
        folder = undefined;
      }
      if (folder === undefined) {
        cached = null;
        return false;
      }
      const stamp = `${folder.ino}:${folder.mtimeNs}:${folder.ctimeNs}`;
      if (cached?.stamp === stamp) return cached.locked;
      // Read after the stat: a change after it gives the next check another stamp.
      const locked = (await holder()) !== null;
      const settled = Date.now() - Number(folder.mtimeMs) > RACY_MS;
      cached = settled ? { stamp, locked } : null;
      return locked;
    },
    async lock(by, at) {
      await mkdir(dirname(path), { recursive: true });
      try {
        await writeFile(path, `${JSON.stringify({ by, at })}\n`, { flag: 'wx', mode: 0o644 });
        return { changed: true };
      } catch (err) {
        if (isCode(err, 'EEXIST')) return { changed: false };
        throw err;
      }
    },
    async unlock() {
      const h = await holder();
      if (h === null) return { changed: false, by: null };
      await rm(path, { force: true });
      return { changed: true, by: h.by };
    },
  };
}

export function isCode(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}
