// The first line of a tool result's text mirror (DESIGN.md §1): what happened and the next step, in
// words a model cannot take for a success — derived from (remote_effect, retry) alone, for every
// transport, so the line can never contradict the envelope:
//   none     -> "NOT DONE — …"            (known not applied: the only case that says NOT DONE)
//   applied  -> "DONE, BUT … — …"         (it took effect; the answer is not what was asked)
//   unknown  -> "OUTCOME UNKNOWN — …"     (it may have taken effect: check before anything else)
// A call the gateway held without forwarding (a refusal code in data) says so after the line.
import type { Envelope } from './envelope.js';
import type { RemoteEffect, Retry } from './vocabulary.js';

type Parts = Pick<
  Envelope,
  'ok' | 'category' | 'operation' | 'operation_id' | 'retry' | 'remote_effect' | 'retry_after_ms'
> & { data?: unknown };

/** The opening words per remote effect (of a failure: ok is false). */
export const HEADLINE_LEAD: Readonly<Record<RemoteEffect, (e: Parts) => string>> = {
  none: (e) =>
    e.category === 'invalid_input' ? 'NOT DONE — invalid input' : `NOT DONE — ${e.category}`,
  applied: (e) =>
    e.category === 'malformed_response'
      ? 'DONE, BUT the reply was malformed'
      : e.category === 'duplicate_effect'
        ? 'DONE MORE THAN ONCE — duplicate_effect'
        : `DONE, BUT ${e.category}`,
  unknown: (e) => `OUTCOME UNKNOWN — ${e.category}`,
};

/** The next step per retry directive; `effect` tells a call known not applied from the rest. */
export const HEADLINE_NEXT: Readonly<Record<Retry, (e: Parts) => string>> = {
  reconcile_first: (e) =>
    e.remote_effect === 'none'
      ? `look it up before anything else (reconcile_operation ${id(e)})`
      : `check before retrying (reconcile_operation ${id(e)})`,
  after_approval: (e) => {
    const card = (e.data as { approval_id?: unknown } | null | undefined)?.approval_id;
    return `waiting for a person's approval${typeof card === 'string' ? ` (${card})` : ''}: call again with operation_id ${id(e)} after it is approved`;
  },
  allowed: (e) => `you may call again with operation_id ${id(e)}`,
  after_delay: (e) => `call again with operation_id ${id(e)} after ${e.retry_after_ms ?? 0} ms`,
  escalate: (e) =>
    e.remote_effect === 'none'
      ? `stop; a person must decide (operation ${e.operation_id ?? 'none'})`
      : `stop; do not repeat this call — a person must check and decide (operation ${e.operation_id ?? 'none'})`,
  never: (e) =>
    e.category === 'invalid_input'
      ? 'fix the arguments, nothing was sent'
      : e.remote_effect === 'none'
        ? 'do not retry this call'
        : 'do not repeat this call',
};

const id = (e: Parts): string => e.operation_id ?? '';

export function headline(e: Parts): string {
  const refused = refusalCode(e);
  if (e.ok) {
    if (refused === 'request_changed')
      return `DONE EARLIER, THIS CALL REFUSED — operation ${id(e)} already succeeded with another request; a changed request is a new operation: call without operation_id.`;
    if (refused !== null && refused !== 'already_settled' && !refused.startsWith('duplicate_'))
      return `DONE EARLIER, THIS CALL REFUSED — operation ${id(e)} already succeeded; this call sent nothing (refused: ${refused}).`;
    return `DONE — ${e.operation} succeeded.`;
  }
  if (e.retry === 'after_approval' && e.remote_effect === 'none')
    return `NOT DONE — ${HEADLINE_NEXT.after_approval(e)}`;
  const line = `${HEADLINE_LEAD[e.remote_effect](e)}: ${HEADLINE_NEXT[e.retry](e)}`;
  const code = refused;
  if (code === null) return line;
  return code.startsWith('duplicate_')
    ? `${line} (this call was not forwarded: ${code})`
    : `${line} (refused: ${code})`;
}

/** `data.refusal` is `{ code, detail }` (engine refusals, the duplicate guard, SSH wrapper). */
function refusalCode(e: Parts): string | null {
  const refusal = (e.data as { refusal?: unknown } | null | undefined)?.refusal;
  const code =
    typeof refusal === 'object' && refusal !== null
      ? (refusal as { code?: unknown }).code
      : refusal;
  return typeof code === 'string' ? code : null;
}
