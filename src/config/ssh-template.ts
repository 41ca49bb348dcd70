// Command templates of SSH actions. `{{input.a.b}}` is replaced by the value shell-quoted as one
// word ('…', with every ' written '\''), so an argument can never become code: quotes, `;`, `$(…)`,
// backticks, newlines and globs arrive as text. A placeholder is only allowed where the shell reads
// a plain word: not inside '…' or "…" (the value's own quotes would end there), not after a
// backslash, and not in a here-document (whose body the shell expands without quote removal).
// These rules are checked when the configuration loads.
import { UsageError } from '../engine/runtime.js';
import { shQuote } from '../ssh/wrapper.js';

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\s*\}\}/g;

export interface CommandPlaceholder {
  /** e.g. `input.service` */
  name: string;
  /** Where the shell would read it; null when that is a plain word (the only safe place). */
  unsafe: string | null;
}

/** Every placeholder of a command template, with why its place is unsafe (if it is). */
export function commandPlaceholders(template: string): CommandPlaceholder[] {
  const out: CommandPlaceholder[] = [];
  let quote: "'" | '"' | null = null;
  let heredoc = false;
  for (let i = 0; i < template.length; i++) {
    const c = template[i]!;
    if (c === '{' && template[i + 1] === '{') {
      PLACEHOLDER.lastIndex = i;
      const m = PLACEHOLDER.exec(template);
      if (m && m.index === i) {
        const unsafe =
          quote === "'"
            ? "inside '…' quotes"
            : quote === '"'
              ? 'inside "…" quotes'
              : i > 0 && template[i - 1] === '\\'
                ? 'after a backslash'
                : heredoc
                  ? 'after a here-document (<<)'
                  : null;
        out.push({ name: m[1]!, unsafe });
        i += m[0].length - 1;
        continue;
      }
    }
    if (quote === "'") {
      if (c === "'") quote = null;
    } else if (quote === '"') {
      if (c === '\\') i++;
      else if (c === '"') quote = null;
    } else if (c === '\\') {
      i++;
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === '<' && template[i + 1] === '<') {
      heredoc = true;
    }
  }
  return out;
}

function lookup(name: string, input: unknown): unknown {
  let v = input;
  for (const part of name.split('.').slice(1)) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

/** The text of a value as the command receives it (strings as they are, the rest as JSON). */
export function valueText(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/**
 * Renders a command: each value shell-quoted. A missing or empty value is misuse (an empty word
 * would silently change the command, e.g. `rm -r /data/{{input.dir}}`), as is a NUL character,
 * which no remote shell can carry.
 */
export function renderCommand(template: string, input: unknown): string {
  return template.replace(PLACEHOLDER, (_: string, name: string) => {
    const v = lookup(name, input);
    if (v === undefined || v === null)
      throw new UsageError('invalid_input', `the command needs a value for {{${name}}}`);
    const text = valueText(v);
    if (text === '')
      throw new UsageError('invalid_input', `the command needs a non-empty {{${name}}}`);
    if (text.includes('\0'))
      throw new UsageError('invalid_input', `{{${name}}} would put a NUL character in the command`);
    return shQuote(text);
  });
}
