// Command-line manners: "did you mean" for a mistyped name, and help text wrapped between options.
// Pure functions over strings, so main.ts and every command can use them without loading anything.

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The one known name `word` most likely meant: the closest within a third of its length (at least
 * one edit), or the only name it is a prefix of (three letters or more). None when two names are
 * equally close, so a suggestion is never a coin toss.
 */
export function didYouMean(word: string, known: Iterable<string>): string | undefined {
  const names = [...new Set(known)];
  const w = word.toLowerCase();
  const limit = Math.max(1, Math.floor(w.length / 3));
  let best: string[] = [];
  let bestDistance = Infinity;
  for (const name of names) {
    const distance = editDistance(w, name.toLowerCase());
    if (distance > limit) continue;
    if (distance < bestDistance) [best, bestDistance] = [[name], distance];
    else if (distance === bestDistance) best.push(name);
  }
  if (best.length === 1) return best[0];
  if (best.length > 1) return undefined;
  const prefixed = w.length >= 3 ? names.filter((n) => n.toLowerCase().startsWith(w)) : [];
  return prefixed.length === 1 ? prefixed[0] : undefined;
}

/** ` (did you mean X?)`, or nothing. */
export function suggestion(word: string, known: Iterable<string>, prefix = ''): string {
  const hit = didYouMean(word, known);
  return hit === undefined ? '' : ` (did you mean ${prefix}${hit}?)`;
}

/**
 * Splits a usage line into units that must stay on one line: words, and bracketed groups such as
 * `[--concurrency N | --serial]` whole (a group is never cut inside its brackets).
 */
export function usageUnits(usage: string): string[] {
  const units: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of usage) {
    if (ch === '[' || ch === '(' || ch === '{') depth++;
    if (ch === ']' || ch === ')' || ch === '}') depth = Math.max(0, depth - 1);
    if (ch === ' ' && depth === 0) {
      if (current !== '') units.push(current);
      current = '';
    } else current += ch;
  }
  if (current !== '') units.push(current);
  return units;
}

/** Alternatives of one usage, `a | b`, split only where the `|` is outside every bracket. */
export function usageAlternatives(usage: string): string[] {
  const units = usageUnits(usage);
  const out: string[][] = [[]];
  for (const u of units) {
    if (u === '|') out.push([]);
    else out.at(-1)!.push(u);
  }
  return out.map((alt) => alt.join(' ')).filter((alt) => alt !== '');
}

/**
 * Fills lines of at most `width` characters from `units`, the first line starting with `first`,
 * the others with `rest` (indentation). A unit longer than a line gets a line of its own.
 */
export function fill(
  units: readonly string[],
  width: number,
  first: string,
  rest: string,
): string[] {
  const lines: string[] = [];
  let line = first;
  let empty = true;
  for (const unit of units) {
    if (!empty && line.length + 1 + unit.length > width) {
      lines.push(line);
      line = rest + unit;
    } else {
      line += (empty ? '' : ' ') + unit;
    }
    empty = false;
  }
  lines.push(line);
  return lines;
}

/** Prose wrapped at word boundaries. */
export function wrapText(text: string, width: number, first: string, rest = first): string[] {
  return fill(text.split(/\s+/).filter(Boolean), width, first, rest);
}

/** A usage wrapped between options, never inside brackets. */
export function wrapUsage(usage: string, width: number, first: string, rest: string): string[] {
  return fill(usageUnits(usage), width, first, rest);
}
