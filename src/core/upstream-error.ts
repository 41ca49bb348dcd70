// What an upstream MCP server said when a call failed, for the agent: the text of an `isError`
// result or the message of a JSON-RPC error, redacted first and then bounded (DESIGN.md §5). The
// model needs these words to correct itself ("Access denied - path outside allowed directories");
// they go to `data.upstream_error`, never into `message`.
import { cutRedacted, type Redactor } from './redact.js';

/** At most this many characters of the upstream's error text reach the envelope. */
export const UPSTREAM_ERROR_MAX = 2000;

export interface UpstreamErrorData {
  upstream_error: string;
  /** Present (true) only when the text was cut to UPSTREAM_ERROR_MAX characters. */
  upstream_error_truncated?: true;
  /** The JSON-RPC error code, when the upstream answered with one. */
  upstream_error_code?: number;
}

/**
 * The raw error of a failed upstream answer: the text items of an `isError` result (else its
 * structured content as JSON), or a JSON-RPC error's message. Null when the answer carried none.
 */
export function upstreamErrorOf(
  reply: unknown,
  rpcError: unknown,
): { text: string; code?: number } | null {
  if (isRecord(rpcError)) {
    const code = typeof rpcError['code'] === 'number' ? rpcError['code'] : undefined;
    const message = typeof rpcError['message'] === 'string' ? rpcError['message'] : '';
    const text = rpcError['data'] === undefined ? message : `${message} ${json(rpcError['data'])}`;
    return { text: text.trim(), ...(code !== undefined ? { code } : {}) };
  }
  if (!isRecord(reply) || reply['isError'] !== true) return null;
  const content = Array.isArray(reply['content']) ? reply['content'] : [];
  const texts = content
    .filter(isRecord)
    .filter((c) => c['type'] === 'text' && typeof c['text'] === 'string')
    .map((c) => c['text'] as string);
  if (texts.length > 0) return { text: texts.join('\n') };
  if (reply['structuredContent'] !== undefined) return { text: json(reply['structuredContent']) };
  return { text: '' };
}

/** The envelope's data for a failed upstream answer: redacted, then cut (never the reverse). */
export function upstreamErrorData(
  error: { text: string; code?: number },
  redactor: Pick<Redactor, 'redactString'>,
): UpstreamErrorData {
  const redacted = redactor.redactString(error.text);
  const kept = cutRedacted(redacted, UPSTREAM_ERROR_MAX);
  return {
    upstream_error: kept,
    ...(kept.length < redacted.length ? { upstream_error_truncated: true as const } : {}),
    ...(error.code !== undefined ? { upstream_error_code: error.code } : {}),
  };
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function json(v: unknown): string {
  try {
    return JSON.stringify(v) ?? '';
  } catch {
    return '';
  }
}
