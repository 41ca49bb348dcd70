// An object with exactly these own enumerable keys, in order, `__proto__` included as an own key
// (as a spread or a JSON parse makes it): what property tests feed to object-copying code.
export function objectOfEntries(
  entries: readonly (readonly [string, unknown])[],
): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const [k, v] of entries)
    Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  return o;
}
