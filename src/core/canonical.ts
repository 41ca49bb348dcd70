// Canonical JSON: object keys sorted by UTF-16 code units, no whitespace, numbers in their
// shortest round-trip form (the JCS ordering of RFC 8785 for the JSON values Candor produces).
// `undefined` members are dropped, as JSON.stringify does. Non-JSON values are rejected.
// It runs on every ledger append, so it avoids intermediate arrays and sets on the hot path.

const MAX_DEPTH = 512;
/** Printable ASCII without `"` and `\`: such strings need no escaping (the common case). */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

const quote = (s: string): string => (PLAIN.test(s) ? `"${s}"` : JSON.stringify(s));

export function canonicalJson(value: unknown): string {
  return encode(value, 0);
}

function encode(value: unknown, depth: number): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonicalJson: non-finite number');
      return JSON.stringify(value);
    case 'string':
      return quote(value);
    case 'bigint':
      return value.toString();
    case 'object': {
      // Deeper than any record Candor writes: a cycle (or an abuse), never a valid event.
      if (depth > MAX_DEPTH) throw new TypeError('canonicalJson: cycle or nesting too deep');
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out += ',';
          const v: unknown = value[i];
          out += encode(v === undefined ? null : v, depth + 1);
        }
        return `${out}]`;
      }
      if (value instanceof Uint8Array) return JSON.stringify(Buffer.from(value).toString('base64'));
      const obj = value as Record<string, unknown>;
      const keys = Object.keys(obj).sort();
      let out = '{';
      let first = true;
      for (const k of keys) {
        const v = obj[k];
        if (v === undefined) continue;
        if (!first) out += ',';
        first = false;
        out += `${quote(k)}:${encode(v, depth + 1)}`;
      }
      return `${out}}`;
    }
    default:
      throw new TypeError(`canonicalJson: cannot encode ${typeof value}`);
  }
}
