// The one redaction layer applied to every agent-visible output, log line, trace, transcript and
// clear ledger field. It removes, replacing each span with `[REDACTED]`:
// - every known secret (from the vault, `addSecret`, or given at creation) in the forms of
//   secret-forms.ts: exact, JSON-escaped, URL-encoded, hex, base64 and base64url (all alignments);
// - the same, written with any mix of JSON escapes (`\u0074`, `\/`, also escaped twice) and
//   percent escapes (`%74`): the text is searched again through a decoded view whose every character
//   maps back to the span of the original text it came from;
// - at the start and the end of a text (where a cut may have split a secret), any prefix or suffix
//   of MIN_CUT_FRAGMENT (8) or more characters of a secret or of one of its forms;
// - values of secret-bearing headers (Authorization, Proxy-Authorization, Cookie, Set-Cookie and
//   the API-key headers of core/fingerprint.ts), in header objects, [name, value] arrays, raw
//   `Name: value` text and serialised `"name": "value"` JSON;
// - PEM private key blocks (also unterminated ones, to the end of the text);
// - common token shapes: `Bearer <token>`, JWTs, GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`,
//   `github_pat_`), `sk-…`, Slack `xox?-…`, AWS access key ids, and `token=` / `key=` / `secret=`
//   / `password=` (and `access_token=`, `api_key=`, …) values in URLs, query strings and env lines.
//
// Short secrets: a secret of fewer than MIN_SECRET_LENGTH (4) characters is ignored (`addSecret`
// returns false) because it would rewrite ordinary words; the vault refuses such values, so every
// stored secret is covered. A secret that lies inside the marker text itself (e.g. `DACT`) cannot be
// hidden by any replacement and is refused the same way. Shape rules require lengths typical of
// real tokens (Bearer ≥ 16, `token=`/`key=` values ≥ 8) so prose like "a Bearer token" survives.
//
// Cut after redacting, never before (`redactedExcerpt`): a cut first would split a secret into
// pieces no rule recognises.
//
// Redaction runs to a fixed point (a replacement can, in contrived cases, form a new match with its
// neighbours), which also makes it idempotent: redact(redact(x)) === redact(x).
import { SECRET_HEADERS } from './fingerprint.js';
import { secretForms } from './secret-forms.js';

export const REDACTED = '[REDACTED]';

/**
 * Secrets shorter than this are refused by the vault and ignored by the redactor: a value of one to
 * three characters occurs in ordinary text so often that redacting it would destroy the output,
 * and storing a secret the redactor cannot protect would break the hygiene guarantee.
 */
export const MIN_SECRET_LENGTH = 4;

export interface Redactor {
  redactString(text: string): string;
  /** A deep copy of a JSON-like value with every string (keys too) redacted. */
  redactValue<T>(value: T): T;
  /** Adds a secret; false when it is too short or cannot be hidden (see the file comment). */
  addSecret(secret: string): boolean;
  /** Whether `text` holds a known secret in any of its forms (for tests and leak checks). */
  containsSecret(text: string): boolean;
}

/** Object keys whose values are secret whatever they look like (compared lower-cased). */
const SECRET_FIELDS: ReadonlySet<string> = new Set([
  ...SECRET_HEADERS,
  'password',
  'passwd',
  'passphrase',
  'secret',
  'client_secret',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'api_key',
  'apikey',
  'private_key',
]);

const headerAlternation = [...SECRET_HEADERS].map((h) => h.replace(/-/g, '\\-')).join('|');
const fieldAlternation = [...SECRET_FIELDS].map((h) => h.replace(/-/g, '\\-')).join('|');

/**
 * A header value in raw text runs to the end of the line, or to a literal `\r`/`\n` escape, or to a
 * double quote that closes a JSON string (followed by `}`, `]`, `, "` or the end); quotes inside a
 * Digest-style value (`realm="x", nonce=…`) stay part of the value.
 */
const HEADER_VALUE = String.raw`(?:[^\r\n"\\]|\\(?![rn])|"(?!\s*(?:[}\]]|,\s*"|$)))*`;

interface ShapeRule {
  pattern: RegExp;
  /** Capture group holding the span to hide; 0 = the whole match. */
  group: number;
  /** Optional extra check on the captured span. */
  accept?: (match: RegExpExecArray) => boolean;
  /**
   * A text every match must contain (the pattern's literal part; lower-case for a caseless
   * pattern, then looked up in the lower-cased text): a text without it is not searched at all.
   */
  needs: string;
}

const SHAPES: readonly ShapeRule[] = [
  {
    pattern:
      /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)/dg,
    group: 0,
    needs: '-----BEGIN ',
  },
  {
    pattern: new RegExp(
      String.raw`(?<![A-Za-z0-9_-])(${headerAlternation})[ \t]*:[ \t]*(${HEADER_VALUE})`,
      'dgi',
    ),
    group: 2,
    needs: ':',
  },
  {
    pattern: new RegExp(String.raw`"(${fieldAlternation})"[ \t]*:[ \t]*"((?:[^"\\]|\\.)*)"`, 'dgi'),
    group: 2,
    needs: '"',
  },
  { pattern: /\bBearer[ \t]+([A-Za-z0-9\-._~+/]{16,}=*)/dgi, group: 1, needs: 'bearer' },
  { pattern: /\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/dg, group: 0, needs: 'eyJ' },
  {
    pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/dg,
    group: 0,
    needs: '_',
  },
  { pattern: /\bsk-[A-Za-z0-9_-]{16,}/dg, group: 0, needs: 'sk-' },
  { pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}/dg, group: 0, needs: 'xox' },
  { pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/dg, group: 0, needs: 'IA' },
  {
    pattern:
      /(?<=^|[?&;#\s"'{(,])((?:access_|refresh_|id_|api_|auth_|client_|private_|session_|x-api-)?(?:token|key|secret|password|passwd|pwd|apikey|signature|sig))=([^&\s"'#<>[\]\\]+)/dgi,
    group: 2,
    // Password-like values are hidden at any length; keys and tokens from 8 characters on.
    accept: (m) => /pass|pwd|secret/i.test(m[1] ?? '') || (m[2] ?? '').length >= 8,
    needs: '=',
  },
];

const MAX_ROUNDS = 8;

/** A prefix or suffix of a secret this long, at the edge of a text, is hidden (see the header). */
export const MIN_CUT_FRAGMENT = 8;

/** How many levels of escaping the decoded view undoes (JSON inside JSON inside a URL). */
const MAX_DECODE_LEVELS = 3;

/**
 * Clean strings (ones redaction leaves as they are) remembered per redactor, so the header names,
 * keys and values that recur in every record are searched once. Only short strings, and at most
 * this many before the memory starts over; a new secret forgets them all.
 */
const CLEAN_CACHE_MAX = 4096;
const CLEAN_CACHE_MAX_LENGTH = 256;

export function createRedactor(secrets: Iterable<string> = []): Redactor {
  const exact = new Set<string>();
  /**
   * Forms matched ignoring ASCII case, by form. An ASCII form (all of them, as secretForms makes
   * them) is looked up in the text with its ASCII letters lower-cased, which finds exactly the
   * matches of a case-insensitive RegExp of the form (that never matches a non-ASCII character
   * against an ASCII one); any other form keeps its RegExp.
   */
  const caseless = new Map<string, { lower: string } | { re: RegExp }>();
  const added = new Set<string>();
  /** Forms long enough to leave a MIN_CUT_FRAGMENT piece at a cut; caseless ones lower-cased. */
  const cutForms: { form: string; fold: boolean }[] = [];
  const clean = new Set<string>();

  const addSecret = (secret: string): boolean => {
    if (secret.length < MIN_SECRET_LENGTH || REDACTED.includes(secret)) return false;
    if (added.has(secret)) return true;
    added.add(secret);
    clean.clear();
    const forms = secretForms(secret, REDACTED);
    for (const form of forms.exact) exact.add(form);
    for (const form of forms.caseless) {
      if (!caseless.has(form))
        caseless.set(
          form,
          ASCII.test(form)
            ? { lower: asciiLower(form) }
            : { re: new RegExp(escapeRegExp(form), 'gi') },
        );
    }
    for (const form of forms.exact) {
      if (form.length > MIN_CUT_FRAGMENT) cutForms.push({ form, fold: false });
    }
    for (const form of forms.caseless) {
      if (form.length > MIN_CUT_FRAGMENT) cutForms.push({ form: form.toLowerCase(), fold: true });
    }
    return true;
  };

  const secretSpans = (text: string, spans: [number, number][], folded: string | null): void => {
    encodedSpans(text, spans, folded);
    cutSpans(text, spans);
    // Escaped forms: search the decoded views and map each hit back to the original text.
    let view: DecodedView | null = { text, start: null, end: null };
    for (let level = 0; level < MAX_DECODE_LEVELS; level++) {
      view = decodeView(view);
      if (view === null) break;
      const found: [number, number][] = [];
      encodedSpans(view.text, found, null);
      for (const [a, b] of found) spans.push([view.start![a]!, view.end![b - 1]!]);
    }
  };

  /**
   * A prefix of a secret form ending the text, or a suffix of one starting it: the longest of
   * MIN_CUT_FRAGMENT or more characters. Such a piece holds the form's first (or the text's
   * first) MIN_CUT_FRAGMENT characters, so only where those occur is a piece compared.
   */
  const cutSpans = (text: string, spans: [number, number][]): void => {
    if (text.length < MIN_CUT_FRAGMENT || cutForms.length === 0) return;
    let lower: string | null = null;
    let head = 0;
    let tail = 0;
    for (const { form, fold } of cutForms) {
      const t = fold ? (lower ??= text.toLowerCase()) : text;
      const longest = Math.min(form.length - 1, t.length);
      if (longest < MIN_CUT_FRAGMENT) continue;
      // Tail: t ends with form[0, n) — form's first characters at p = t.length - n.
      const lastP = t.length - Math.max(MIN_CUT_FRAGMENT, tail + 1);
      const formHead = form.slice(0, MIN_CUT_FRAGMENT);
      for (let p = t.indexOf(formHead, t.length - longest); p >= 0 && p <= lastP;) {
        if (form.startsWith(t.slice(p))) {
          tail = t.length - p;
          break;
        }
        p = t.indexOf(formHead, p + 1);
      }
      // Head: t starts with form[q, form.length) — t's first characters at q in the form.
      const lastQ = form.length - Math.max(MIN_CUT_FRAGMENT, head + 1);
      const textHead = t.slice(0, MIN_CUT_FRAGMENT);
      for (let q = form.indexOf(textHead, form.length - longest); q >= 0 && q <= lastQ;) {
        if (t.startsWith(form.slice(q))) {
          head = form.length - q;
          break;
        }
        q = form.indexOf(textHead, q + 1);
      }
    }
    if (head > 0) spans.push([0, head]);
    if (tail > 0) spans.push([text.length - tail, text.length]);
  };

  /** `folded`: the text with its ASCII letters lower-cased, when the caller has it already. */
  const encodedSpans = (text: string, spans: [number, number][], folded: string | null): void => {
    for (const form of exact) {
      for (let i = text.indexOf(form); i >= 0; i = text.indexOf(form, i + 1)) {
        spans.push([i, i + form.length]);
      }
    }
    if (caseless.size === 0) return;
    const f = folded ?? asciiLower(text);
    for (const c of caseless.values()) {
      if ('lower' in c) {
        for (let i = f.indexOf(c.lower); i >= 0; i = f.indexOf(c.lower, i + 1)) {
          spans.push([i, i + c.lower.length]);
        }
        continue;
      }
      const re = c.re;
      re.lastIndex = 0;
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        spans.push([m.index, m.index + m[0].length]);
        re.lastIndex = m.index + 1;
      }
    }
  };

  const redactOnce = (text: string): string => {
    const spans: [number, number][] = [];
    const folded = asciiLower(text);
    secretSpans(text, spans, folded);
    for (const rule of SHAPES) {
      if ((rule.pattern.ignoreCase ? folded : text).includes(rule.needs))
        shapeSpans(rule, text, spans);
    }
    if (spans.length === 0) return text;
    spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
    let out = '';
    let cursor = 0;
    let i = 0;
    while (i < spans.length) {
      let [start, end] = spans[i]!;
      // Merge overlapping and touching spans into one marker.
      while (i + 1 < spans.length && spans[i + 1]![0] <= end) {
        end = Math.max(end, spans[i + 1]![1]);
        i++;
      }
      i++;
      if (start < cursor) start = cursor;
      out += text.slice(cursor, start) + REDACTED;
      cursor = end;
    }
    return out + text.slice(cursor);
  };

  const redactString = (text: string): string => {
    if (clean.has(text)) return text;
    let current = text;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const next = redactOnce(current);
      if (next === current) break;
      current = next;
    }
    if (current === text && text.length <= CLEAN_CACHE_MAX_LENGTH) {
      if (clean.size >= CLEAN_CACHE_MAX) clean.clear();
      clean.add(text);
    }
    return current;
  };

  /**
   * `path`: the objects being copied, outermost first (a value met again on its own path is a
   * cycle; one met again elsewhere is copied again). A short array: paths are a few levels deep.
   */
  const redactValue = (value: unknown, path: object[]): unknown => {
    if (typeof value === 'string') return redactString(value);
    if (value === null || typeof value !== 'object') return value;
    if (path.includes(value)) return '[Circular]';
    path.push(value);
    try {
      const withJson = value as { toJSON?: unknown };
      if (typeof withJson.toJSON === 'function') {
        return redactValue((withJson.toJSON as () => unknown).call(value), path);
      }
      if (Array.isArray(value)) {
        const items: unknown[] = value;
        return items.map((item, i) => {
          const prev = items[i - 1];
          const afterHeaderName =
            typeof prev === 'string' && SECRET_HEADERS.has(prev.toLowerCase());
          return afterHeaderName && typeof item === 'string' && item !== ''
            ? REDACTED
            : redactValue(item, path);
        });
      }
      const source = value as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      // The names given so far; kept only once a key has changed (until then the keys are the
      // object's own, which are distinct), so that two keys redacted alike stay apart.
      let used: Set<string> | null = null;
      for (const key of Object.keys(source)) {
        const item = source[key];
        const redacted = SECRET_FIELDS.has(key.toLowerCase())
          ? hideWhole(item)
          : redactValue(item, path);
        const name = redactString(key);
        if (used === null && name !== key) used = new Set(Object.keys(out));
        define(out, used === null ? name : uniqueKey(name, used), redacted);
      }
      return out;
    } finally {
      path.pop();
    }
  };

  for (const secret of secrets) addSecret(secret);

  return {
    redactString,
    redactValue: <T>(value: T): T => redactValue(value, []) as T,
    addSecret,
    containsSecret: (text) => {
      const spans: [number, number][] = [];
      secretSpans(text, spans, null);
      return spans.length > 0;
    },
  };
}

/**
 * A text with one level of JSON escapes (`\uXXXX`, `\/`, `\"`, `\\`, `\n`…) and percent escapes
 * (`%XX`, UTF-8) undone; `start[i]`/`end[i]` give the original span (end exclusive) that character
 * `i` came from. Null when nothing was decoded. `start`/`end` null = the identity map.
 */
interface DecodedView {
  text: string;
  start: number[] | null;
  end: number[] | null;
}

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

function decodeView(from: DecodedView): DecodedView | null {
  const text = from.text;
  if (!text.includes('\\') && !text.includes('%')) return null;
  let out = '';
  const start: number[] = [];
  const end: number[] = [];
  const emit = (chars: string, a: number, b: number): void => {
    const s = from.start === null ? a : from.start[a]!;
    const e = from.end === null ? b : from.end[b - 1]!;
    for (let k = 0; k < chars.length; k++) {
      start.push(s);
      end.push(e);
    }
    out += chars;
  };
  let changed = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '\\' && i + 1 < text.length) {
      const next = text[i + 1]!;
      const hex = text.slice(i + 2, i + 6);
      if (next === 'u' && /^[0-9a-fA-F]{4}$/.test(hex)) {
        emit(String.fromCharCode(parseInt(hex, 16)), i, i + 6);
        i += 6;
        changed = true;
        continue;
      }
      const simple = SIMPLE_ESCAPES[next];
      if (simple !== undefined) {
        emit(simple, i, i + 2);
        i += 2;
        changed = true;
        continue;
      }
    }
    if (c === '%' && /^[0-9a-fA-F]{2}$/.test(text.slice(i + 1, i + 3))) {
      const first = parseInt(text.slice(i + 1, i + 3), 16);
      const want = first < 0xc0 ? 1 : first < 0xe0 ? 2 : first < 0xf0 ? 3 : 4;
      const bytes = [first];
      let j = i + 3;
      while (bytes.length < want && /^%[0-9a-fA-F]{2}$/.test(text.slice(j, j + 3))) {
        bytes.push(parseInt(text.slice(j + 1, j + 3), 16));
        j += 3;
      }
      emit(Buffer.from(bytes).toString(bytes.length === want ? 'utf8' : 'latin1'), i, j);
      i = j;
      changed = true;
      continue;
    }
    emit(c, i, i + 1);
    i++;
  }
  return changed ? { text: out, start, end } : null;
}

/**
 * The first `max` characters of `text`, which must already be redacted, without splitting a
 * redaction marker (a marker the cut would split is kept whole).
 */
export function cutRedacted(text: string, max: number): string {
  if (text.length <= max) return text;
  const from = Math.max(0, max - REDACTED.length + 1);
  const at = text.indexOf(REDACTED, from);
  if (at >= 0 && at < max) return text.slice(0, at + REDACTED.length);
  return text.slice(0, max);
}

/** How far past the cut an excerpt's text is redacted: more than any secret form is long. */
export const EXCERPT_WINDOW = 64 * 1024;

/**
 * A diagnostics excerpt: the text redacted first (as far as EXCERPT_WINDOW past the cut, so a
 * secret straddling the cut is seen whole), then cut to `max` characters.
 */
export function redactedExcerpt(
  redactor: { redactString(text: string): string },
  text: string,
  max: number,
): string {
  return cutRedacted(redactor.redactString(text.slice(0, max + EXCERPT_WINDOW)), max);
}

function shapeSpans(rule: ShapeRule, text: string, spans: [number, number][]): void {
  const re = rule.pattern;
  re.lastIndex = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m[0].length === 0) re.lastIndex++;
    const range = m.indices?.[rule.group];
    if (range === undefined || range[1] <= range[0]) continue;
    if (rule.accept !== undefined && !rule.accept(m)) continue;
    spans.push([range[0], range[1]]);
  }
}

/** The value of a secret field: every non-empty leaf becomes the marker. */
function hideWhole(value: unknown): unknown {
  if (value === null || value === undefined || value === '') return value;
  if (Array.isArray(value)) return value.map(hideWhole);
  return REDACTED;
}

/** An own data property, as `Object.fromEntries` makes it (`__proto__` too is a plain key). */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__')
    Object.defineProperty(target, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  else target[key] = value;
}

/** Two keys that redact alike must not overwrite each other: later ones get `#2`, `#3`, …. */
function uniqueKey(key: string, used: Set<string>): string {
  let candidate = key;
  for (let n = 2; used.has(candidate); n++) candidate = `${key}#${n}`;
  used.add(candidate);
  return candidate;
}

// eslint-disable-next-line no-control-regex
const ASCII = /^[\x00-\x7f]*$/;

/** The text with A–Z lower-cased and nothing else changed (same length, same positions). */
function asciiLower(text: string): string {
  return /[A-Z]/.test(text) ? text.replace(/[A-Z]+/g, (run) => run.toLowerCase()) : text;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}
