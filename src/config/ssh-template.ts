// Command templates of SSH actions. `{{input.a.b}}` is replaced by the value shell-quoted as one
// word ('…', with every ' written '\''), so an argument can never become code: quotes, `;`, `$(…)`,
// backticks, newlines and globs arrive as text. A placeholder is only allowed where the shell reads
// a plain word — at the top level of the command, in a subshell `( … )` or in a command
// substitution `$( … )` — and never in a shell-active context, where the shell would read the
// quoted value as something else:
//   - inside '…' or "…" (the value's own quotes would end there, or stay literal while `$` and
//     backticks in the value expand), inside bash's `$'…'`, inside backticks `…`;
//   - right after `$` (`${{input.x}}` renders `$'…'`, bash's escape-processing quotes, where a value
//     ending in `\` escapes the closing quote and the rest of the command becomes code);
//   - inside a parameter expansion `${…}` or an arithmetic expansion `$((…))` / `$[…]`;
//   - after a backslash, or after a here-document (`<<`, whose body the shell expands without quote
//     removal);
//   - after a `case` inside a nested context (its `pattern)` ends no parenthesis, so where the
//     context ends is not parsed here: every later placeholder is refused rather than guessed).
// These rules are checked when the configuration loads (FILE:LINE:COL of the command).
import { UsageError } from '../engine/runtime.js';
import { shQuote } from '../ssh/wrapper.js';

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\s*\}\}/g;

export interface CommandPlaceholder {
  /** e.g. `input.service` */
  name: string;
  /** Where the shell would read it; null when that is a plain word (the only safe place). */
  unsafe: string | null;
  /** Offset of the placeholder's `{{` in the template. */
  at: number;
}

/** Shell contexts the scan tracks; `top`, `sub` and `cmd` read a quoted word as one word. */
type Context =
  | 'top' // the command itself
  | 'sub' // ( … )
  | 'cmd' // $( … )
  | 'sq' // '…'
  | 'dq' // "…"
  | 'ansi' // $'…'
  | 'bq' // `…`
  | 'param' // ${…}
  | 'arith' // $((…)) or $[…]
  | 'apar' // ( … ) inside an arithmetic expansion
  | 'comment'; // # … to the end of the line

const UNSAFE_IN: Readonly<Record<Context, string | null>> = {
  top: null,
  sub: null,
  cmd: null,
  sq: "inside '…' quotes",
  dq: 'inside "…" quotes',
  ansi: "inside $'…' quotes",
  bq: 'inside backticks',
  param: 'inside ${…}',
  arith: 'inside an arithmetic expansion',
  apar: 'inside an arithmetic expansion',
  comment: 'inside a comment (a newline in the value would end it)',
};

const plain = (c: Context): boolean => c === 'top' || c === 'sub' || c === 'cmd';

/** Every placeholder of a command template, with why its place is unsafe (if it is). */
export function commandPlaceholders(template: string): CommandPlaceholder[] {
  const out: CommandPlaceholder[] = [];
  const stack: Context[] = ['top'];
  let heredoc = false;
  let uncertain = false;
  const startsPlaceholder = (i: number): RegExpExecArray | null => {
    if (template[i] !== '{' || template[i + 1] !== '{') return null;
    PLACEHOLDER.lastIndex = i;
    const m = PLACEHOLDER.exec(template);
    return m && m.index === i ? m : null;
  };
  for (let i = 0; i < template.length; i++) {
    const c = template[i]!;
    const ctx = stack.at(-1)!;
    const m = startsPlaceholder(i);
    if (m) {
      const prev = template[i - 1];
      const unsafe =
        UNSAFE_IN[ctx] ??
        (prev === '\\'
          ? 'after a backslash'
          : prev === '$'
            ? 'right after $'
            : heredoc
              ? 'after a here-document (<<)'
              : uncertain
                ? 'after a case statement inside a nested context (its end is not parsed)'
                : null);
      out.push({ name: m[1]!, unsafe, at: i });
      i += m[0].length - 1;
      continue;
    }
    const next = template[i + 1];
    if (ctx === 'comment') {
      if (c === '\n') stack.pop();
      continue;
    }
    if (ctx === 'sq') {
      if (c === "'") stack.pop();
      continue;
    }
    // A backslash escapes the next character, but never hides a placeholder from the scan.
    const escapes = c === '\\' && !startsPlaceholder(i + 1);
    if (ctx === 'ansi' || ctx === 'bq') {
      if (escapes) i++;
      else if ((ctx === 'ansi' && c === "'") || (ctx === 'bq' && c === '`')) stack.pop();
      continue;
    }
    if (c === '\\') {
      if (escapes) i++;
      continue;
    }
    if (c === '$') {
      // `$` before a placeholder is judged at the placeholder.
      if (startsPlaceholder(i + 1)) continue;
      if (next === "'" && plain(ctx)) stack.push('ansi');
      else if (next === '{') stack.push('param');
      else if (next === '(' && template[i + 2] === '(') stack.push('arith');
      else if (next === '(') stack.push('cmd');
      else if (next === '[') stack.push('arith');
      else continue;
      i += next === '(' && template[i + 2] === '(' ? 2 : 1;
      continue;
    }
    if (c === '`') {
      stack.push('bq');
      continue;
    }
    if (c === '"') {
      if (ctx === 'dq') stack.pop();
      else stack.push('dq');
      continue;
    }
    if (ctx === 'dq') continue;
    if (c === "'") stack.push('sq');
    else if (c === '}' && ctx === 'param') stack.pop();
    else if (c === ']' && ctx === 'arith') stack.pop();
    else if (c === '(' && (ctx === 'arith' || ctx === 'apar')) stack.push('apar');
    else if (c === ')' && ctx === 'apar') stack.pop();
    else if (c === ')' && ctx === 'arith' && next === ')') {
      stack.pop();
      i++;
    } else if (c === '#' && plain(ctx) && /^$|[\s;&|()]/.test(template[i - 1] ?? ''))
      stack.push('comment');
    else if (c === '(' && plain(ctx)) stack.push('sub');
    else if (c === ')' && (ctx === 'sub' || ctx === 'cmd')) stack.pop();
    else if (c === '<' && next === '<') heredoc = true;
    else if (
      stack.length > 1 &&
      /[a-z]/.test(c) &&
      template.startsWith('case', i) &&
      !/[A-Za-z0-9_]/.test(template[i - 1] ?? ' ') &&
      !/[A-Za-z0-9_]/.test(template[i + 4] ?? ' ')
    )
      uncertain = true;
  }
  // Every placeholder renderCommand would replace is judged: one the scan stepped over is refused.
  const seen = new Set(out.map((p) => p.at));
  for (const m of template.matchAll(PLACEHOLDER))
    if (!seen.has(m.index))
      out.push({ name: m[1]!, unsafe: 'where the scan cannot read it', at: m.index });
  return out.sort((a, b) => a.at - b.at);
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
