// Misuse, as opposed to outcomes: a UsageError is thrown only when the caller asked for something
// that cannot be done as asked (bad input, an unknown operation or action, someone else's
// operation). Expected outcomes are envelopes, never exceptions. The codes are a closed set.

export const UsageErrorCode = {
  /** The input breaks the action's schema or its request templates. */
  invalid_input: 'invalid_input',
  /** No operation with this id in the ledger. */
  unknown_operation: 'unknown_operation',
  /** The operation's action is not registered in this runtime. */
  unknown_action: 'unknown_action',
  /** Only the operation's owner decides a retry. */
  not_owner: 'not_owner',
  /** A correlation id already names another operation. */
  correlation_id_reused: 'correlation_id_reused',
} as const;
export type UsageErrorCode = (typeof UsageErrorCode)[keyof typeof UsageErrorCode];

export class UsageError extends Error {
  constructor(
    readonly code: UsageErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Whether `error` is a UsageError (with `code`, when given): the guard callers branch on. */
export function isUsageError(error: unknown, code?: UsageErrorCode): error is UsageError {
  return error instanceof UsageError && (code === undefined || error.code === code);
}
