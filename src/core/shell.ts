// Words for a POSIX shell, for the commands Candor prints (a printed command must work when pasted).

/** A word for a POSIX shell: quoted only when it needs to be. */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
