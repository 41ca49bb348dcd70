import { describe, expect, it } from 'vitest';
import { createIdFactory, idTime, isId, OPERATION_ID_PATTERN } from './ids.js';
import { manualClock, seededRandom } from './time.js';

describe('ids', () => {
  it('are prefixed, well-formed and carry their mint time', () => {
    const clock = manualClock(Date.UTC(2026, 10, 30, 4, 0, 0));
    const ids = createIdFactory(clock, seededRandom(1));
    const op = ids.mint('op');
    expect(op).toMatch(/^op_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(isId(op, 'op')).toBe(true);
    expect(isId(op, 'att')).toBe(false);
    expect(idTime(op)).toBe(clock.now());
  });

  it('sort in mint order, also within one millisecond and across prefixes of one kind', () => {
    const clock = manualClock();
    const ids = createIdFactory(clock, seededRandom(7));
    const minted: string[] = [];
    for (let i = 0; i < 500; i++) {
      if (i % 100 === 0) clock.advance(1);
      minted.push(ids.mint('att'));
    }
    expect([...minted].sort()).toEqual(minted);
    expect(new Set(minted).size).toBe(minted.length);
  });

  it('are replayable from a seed', () => {
    const a = createIdFactory(manualClock(), seededRandom(42));
    const b = createIdFactory(manualClock(), seededRandom(42));
    expect(a.mint('ses')).toBe(b.mint('ses'));
  });
});

describe('OPERATION_ID_PATTERN (the one pattern for MCP operation_id and SSH operation files)', () => {
  it('accepts every minted operation id', () => {
    const ids = createIdFactory(manualClock(), seededRandom(3));
    for (let i = 0; i < 200; i++) expect(ids.mint('op')).toMatch(OPERATION_ID_PATTERN);
  });
  it('refuses what could walk a path, start an option or name another kind of id', () => {
    for (const bad of [
      '../etc',
      '-rf',
      'op_a.b',
      'op_a/b',
      'op_',
      'att_01ABC',
      'op_a b',
      `op_${'x'.repeat(65)}`,
    ]) {
      expect(bad).not.toMatch(OPERATION_ID_PATTERN);
    }
  });
});
