import { describe, expect, it } from 'vitest';
import { envelopeStdout } from './adapter.js';

describe('envelopeStdout', () => {
  it('keeps short output whole and unflagged', () => {
    expect(envelopeStdout('ok\n', 0)).toEqual({ stdout: 'ok\n' });
  });

  it('cuts by bytes on a character boundary and counts every byte dropped', () => {
    // 'é' is two bytes: a cut at 5 bytes would split the third one, so 4 bytes are kept.
    expect(envelopeStdout('ééé', 0, 5)).toEqual({
      stdout: 'éé',
      stdout_truncated: { kept_bytes: 4, dropped_bytes: 2 },
    });
  });

  it('flags bytes the wrapper cap dropped even when nothing is cut here', () => {
    expect(envelopeStdout('abc', 10)).toEqual({
      stdout: 'abc',
      stdout_truncated: { kept_bytes: 3, dropped_bytes: 10 },
    });
  });
});
