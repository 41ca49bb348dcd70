// The encoded forms in which a known secret value can surface in text: exact, JSON-escaped (one and
// two levels, and with non-ASCII as \uXXXX), URL-encoded, hex, base64 and base64url.
//
// Base64 is position-dependent: a secret inside a longer encoded string (e.g. the password inside
// `Basic base64(user:password)`) shows a different alphabet string for each of the three byte
// alignments. For alignment k (0..2 bytes before the secret) we keep only the characters whose six
// bits come entirely from the secret, so a match is found whatever surrounds it; the one or two
// boundary characters left behind carry at most a few bits of the secret.

export interface SecretForms {
  /** Matched case-sensitively. */
  exact: string[];
  /** Matched ignoring ASCII case (hex digits, percent escapes, \u escapes). */
  caseless: string[];
}

/** Shifted base64 fragments shorter than this are skipped: they would match ordinary text. */
const MIN_SHIFTED_FRAGMENT = 6;

export function secretForms(secret: string, marker: string): SecretForms {
  const exact = new Set<string>([secret]);
  const caseless = new Set<string>();

  const json1 = JSON.stringify(secret).slice(1, -1);
  exact.add(json1);
  exact.add(JSON.stringify(json1).slice(1, -1));
  caseless.add(asciiJson(json1));

  for (const encode of [encodeURIComponent, encodeURI]) {
    const url = tryEncode(encode, secret);
    if (url !== null) {
      caseless.add(url);
      caseless.add(url.replace(/%20/g, '+'));
    }
  }

  const bytes = Buffer.from(secret, 'utf8');
  caseless.add(bytes.toString('hex'));

  for (let k = 0; k < 3; k++) {
    const shifted = Buffer.concat([Buffer.alloc(k), bytes]);
    const from = Math.ceil((8 * k) / 6);
    const to = Math.floor((8 * (k + bytes.length)) / 6);
    const std = shifted.toString('base64').slice(from, to);
    const url = shifted.toString('base64url').slice(from, to);
    if (k > 0 && std.length < MIN_SHIFTED_FRAGMENT) continue;
    exact.add(std);
    exact.add(url);
    const escaped = tryEncode(encodeURIComponent, std);
    if (escaped !== null && escaped !== std) caseless.add(escaped);
  }

  const lowerMarker = marker.toLowerCase();
  const keep = (form: string, fold: boolean): boolean =>
    form.length > 0 && !(fold ? lowerMarker.includes(form.toLowerCase()) : marker.includes(form));
  const exactList = [...exact].filter((f) => keep(f, false));
  const caselessList = [...caseless].filter((f) => keep(f, true) && !exact.has(f));
  return { exact: exactList, caseless: caselessList };
}

/** The forms a leak check searches for: the exact value and its aligned encodings. */
export function listedForms(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const forms = [
    secret,
    JSON.stringify(secret).slice(1, -1),
    bytes.toString('base64'),
    bytes.toString('base64').replace(/=+$/, ''),
    bytes.toString('base64url'),
    bytes.toString('hex'),
  ];
  const url = tryEncode(encodeURIComponent, secret);
  if (url !== null) forms.push(url);
  return [...new Set(forms)];
}

function asciiJson(escaped: string): string {
  return escaped.replace(
    /[^\x20-\x7e]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

function tryEncode(encode: (s: string) => string, s: string): string | null {
  try {
    return encode(s);
  } catch {
    // A lone surrogate cannot be URL-encoded, so that form cannot occur either.
    return null;
  }
}
