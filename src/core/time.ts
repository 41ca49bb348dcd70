// Time and randomness are injected (STYLE.md): tests use fake clocks and seeded generators.
import { randomBytes } from 'node:crypto';

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export interface Random {
  /** `n` uniformly random bytes. */
  bytes(n: number): Uint8Array;
}

export const systemClock: Clock = { now: () => Date.now() };

export const systemRandom: Random = { bytes: (n) => new Uint8Array(randomBytes(n)) };

/** A deterministic generator (xorshift128+ style) for tests and replayable fakes. */
export function seededRandom(seed: number): Random {
  let s0 = BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n + 1n);
  let s1 = BigInt.asUintN(64, BigInt(seed) ^ 0xdeadbeefcafef00dn);
  const next = (): bigint => {
    let x = s0;
    const y = s1;
    s0 = y;
    x = BigInt.asUintN(64, x ^ (x << 23n));
    s1 = x ^ y ^ (x >> 17n) ^ (y >> 26n);
    return BigInt.asUintN(64, s1 + y);
  };
  return {
    bytes(n) {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i += 8) {
        let v = next();
        for (let j = i; j < Math.min(n, i + 8); j++) {
          out[j] = Number(v & 0xffn);
          v >>= 8n;
        }
      }
      return out;
    },
  };
}

/** A clock that only moves when told to. */
export function manualClock(
  start = Date.UTC(2026, 0, 1),
): Clock & { advance(ms: number): void; set(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    advance(ms) {
      t += ms;
    },
    set(ms) {
      t = ms;
    },
  };
}
