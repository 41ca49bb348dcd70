// Canonical JSON: object keys sorted by UTF-16 code units, no whitespace, numbers in their
// shortest round-trip form (the JCS ordering of RFC 8785 for the JSON values Candor produces).
// `undefined` members are dropped, as JSON.stringify does. Non-JSON values are rejected.

export function canonicalJson(value: unknown): string {
  return encode(value, new Set());
}

function encode(value: unknown, seen: Set<object>): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonicalJson: non-finite number');
      return JSON.stringify(value);
    case 'string':
      return JSON.stringify(value);
    case 'bigint':
      return value.toString();
    case 'object': {
      if (seen.has(value)) throw new TypeError('canonicalJson: cycle');
      seen.add(value);
      let out: string;
      if (Array.isArray(value)) {
        out = `[${value.map((v) => encode(v === undefined ? null : v, seen)).join(',')}]`;
      } else if (value instanceof Uint8Array) {
        out = JSON.stringify(Buffer.from(value).toString('base64'));
      } else {
        const entries = Object.entries(value as Record<string, unknown>)
          .filter(([, v]) => v !== undefined)
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        out = `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${encode(v, seen)}`).join(',')}}`;
      }
      seen.delete(value);
      return out;
    }
    default:
      throw new TypeError(`canonicalJson: cannot encode ${typeof value}`);
  }
}
