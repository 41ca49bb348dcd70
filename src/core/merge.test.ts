// merged(a, b) is `{ ...a, ...b }`: same keys, order, values and prototype, on random objects.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { objectOfEntries } from '../../test/support/own-keys.js';
import { merged } from './merge.js';

const keyArb = fc.constantFrom(
  'a',
  'b',
  'id',
  'headers',
  '__proto__',
  'constructor',
  '0',
  '10',
  'toString',
);
const objArb = fc
  .array(
    fc.tuple(
      keyArb,
      fc.oneof(fc.integer(), fc.string(), fc.constant(undefined), fc.constant(null)),
    ),
    {
      maxLength: 6,
    },
  )
  .map(objectOfEntries);

describe('merged', () => {
  it('equals the spread of both objects (keys, order, values, prototype)', () => {
    fc.assert(
      fc.property(objArb, objArb, (a, b) => {
        const got = merged(a, b);
        const want = { ...a, ...b };
        expect(Reflect.ownKeys(got)).toEqual(Reflect.ownKeys(want));
        expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
        for (const k of Object.keys(want))
          expect((got as Record<string, unknown>)[k]).toBe((want as Record<string, unknown>)[k]);
      }),
      { seed: 20261201, numRuns: 500 },
    );
  });

  it('copies values, not the objects: the inputs are left as they were', () => {
    const a = { x: 1, h: { k: 'v' } };
    const b = { y: 2 };
    const m = merged(a, b);
    m.x = 5;
    expect(a).toEqual({ x: 1, h: { k: 'v' } });
    expect(m).toEqual({ x: 5, h: { k: 'v' }, y: 2 });
    expect(m.h).toBe(a.h);
  });
});
