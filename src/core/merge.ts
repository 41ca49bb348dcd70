// `{ ...a, ...b }` built key by key. V8 (Node 20) takes a slow path when keys are added to an object
// made by a spread — `{ ...event, seq: 0 }`, `{ ...request, id }` cost 5–30 µs each on the
// engine's hot path, against well under 1 µs for the same object built in a loop. The result is the
// spread's: the same own enumerable keys in the same order (later values win, a key keeps its
// first position), `__proto__` an own key as a spread defines it. Symbol keys are not copied: the
// objects merged here (requests, headers, options) have none.

export function merged<A extends object, B extends object>(a: A, b: B): Omit<A, keyof B> & B {
  const out: Record<string, unknown> = {};
  copyInto(out, a as Record<string, unknown>);
  copyInto(out, b as Record<string, unknown>);
  return out as Omit<A, keyof B> & B;
}

function copyInto(out: Record<string, unknown>, from: Record<string, unknown>): void {
  for (const key of Object.keys(from)) {
    if (key === '__proto__')
      Object.defineProperty(out, key, {
        value: from[key],
        enumerable: true,
        writable: true,
        configurable: true,
      });
    else out[key] = from[key];
  }
}
