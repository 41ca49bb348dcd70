// Sortable prefixed ids: `<prefix>_<26 Crockford base32 chars>` = 48-bit millisecond time + 80 random
// bits (ULID layout). Ids minted by one factory in the same millisecond stay strictly increasing.
import { randomBytes } from 'node:crypto';
import { systemClock, type Clock, type Random } from './time.js';

export const IdPrefix = {
  operation: 'op',
  attempt: 'att',
  observation: 'obs',
  session: 'ses',
  approval: 'apr',
  diagnostics: 'diag',
  correlation: 'cor',
} as const;
export type IdPrefix = (typeof IdPrefix)[keyof typeof IdPrefix];

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const ID_PATTERN = /^(op|att|obs|ses|apr|diag|cor)_[0-9A-HJKMNP-TV-Z]{26}$/;

/**
 * The one pattern for an operation id a caller hands back (an MCP tool's `operation_id`, an SSH
 * operation whose id becomes a file name on the remote host): `op_` and up to 64 letters, digits or
 * underscores. Every id the engine mints (`op_` + 26 base32 characters) matches; nothing that could
 * walk a path or start an option does.
 */
export const OPERATION_ID_PATTERN = /^op_[0-9A-Za-z_]{1,64}$/;

export interface IdFactory {
  mint(prefix: IdPrefix): string;
}

/**
 * The ids' random bits, drawn from the system's generator 4 KiB at a time: one call into the
 * generator per id cost more than the rest of the id. Ids are unique, not secret; keys and
 * nonces keep taking `systemRandom` directly.
 */
const idRandom: Random = (() => {
  const POOL = 4096;
  let pool = randomBytes(POOL);
  let at = 0;
  return {
    bytes: (n) => {
      if (n > POOL) return new Uint8Array(randomBytes(n));
      if (at + n > POOL) {
        pool = randomBytes(POOL);
        at = 0;
      }
      const out = new Uint8Array(pool.subarray(at, at + n));
      at += n;
      return out;
    },
  };
})();

export function createIdFactory(clock: Clock = systemClock, random: Random = idRandom): IdFactory {
  let lastTime = -1;
  let lastRandom: number[] = [];
  return {
    mint(prefix) {
      const now = Math.max(0, Math.floor(clock.now()));
      let rand: number[];
      if (now <= lastTime) {
        rand = increment(lastRandom);
      } else {
        rand = Array.from(random.bytes(10));
        lastTime = now;
      }
      lastRandom = rand;
      return `${prefix}_${encodeTime(lastTime)}${encodeRandom(rand)}`;
    },
  };
}

/** Whether `value` is a well-formed id, optionally with the given prefix. */
export function isId(value: unknown, prefix?: IdPrefix): value is string {
  if (typeof value !== 'string' || !ID_PATTERN.test(value)) return false;
  return prefix === undefined || value.startsWith(`${prefix}_`);
}

/** The millisecond timestamp encoded in an id. */
export function idTime(id: string): number {
  const body = id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11);
  let t = 0;
  for (const ch of body) t = t * 32 + ALPHABET.indexOf(ch);
  return t;
}

function encodeTime(ms: number): string {
  let out = '';
  let t = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32]! + out;
    t = Math.floor(t / 32);
  }
  return out;
}

/** 80 bits (10 bytes) as 16 base32 characters: two 40-bit halves, 8 characters each. */
function encodeRandom(bytes: number[]): string {
  return encode40(bytes, 0) + encode40(bytes, 5);
}

function encode40(bytes: number[], at: number): string {
  // 40 bits fit a double exactly (below 2^53).
  let v = 0;
  for (let i = at; i < at + 5; i++) v = v * 256 + (bytes[i] ?? 0);
  let out = '';
  for (let i = 0; i < 8; i++) {
    out = ALPHABET[v % 32]! + out;
    v = Math.floor(v / 32);
  }
  return out;
}

function increment(bytes: number[]): number[] {
  const out = [...bytes];
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i]! < 255) {
      out[i]!++;
      return out;
    }
    out[i] = 0;
  }
  return out; // 2^80 ids in one millisecond: wraps, practically unreachable
}
