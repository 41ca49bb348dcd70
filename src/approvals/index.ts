// Human approvals and the locked gate (DESIGN.md §2 "Approvals").
export {
  ApprovalScope,
  createPolicy,
  defaultPolicy,
  DEFAULT_PER_CALL_TTL_MS,
  DEFAULT_SCOPES,
  SENSITIVE_CLASSES,
  type ApprovalPolicy,
  type PolicyProblem,
  type PolicyResult,
  type PolicySpec,
} from './policy.js';
export {
  cardLines,
  PromptReason,
  type ApprovalCard,
  type PlannedRecovery,
  type PriorAttempt,
} from './card.js';
export {
  createApprovalGate,
  DEFAULT_APPROVAL_WAIT_MS,
  type ApprovalContext,
  type ApprovalGate,
  type ApprovalGateOptions,
  type GateChangeInput,
} from './gate.js';
export { createLockGate } from './lock-gate.js';
export {
  anyLock,
  DEFAULT_APPROVALS_DIR,
  lockFile,
  vaultLock,
  type LockFile,
  type LockSource,
  type VaultGate,
} from './lock.js';
export type { Approver, ApproverDecision, ApproverVerdict } from './approvers/approver.js';
export {
  scriptedApprover,
  type ScriptedAnswer,
  type ScriptedApprover,
} from './approvers/scripted.js';
export { terminalApprover, type TerminalApproverOptions } from './approvers/terminal.js';
export { consoleApprover, type ConsoleApproverOptions } from './approvers/console.js';
export {
  approvalQueue,
  type ApprovalQueue,
  type DecideResult,
  type QueueDecision,
} from './approvers/queue.js';
export {
  answerFromElicitation,
  elicitationApprover,
  elicitationRequest,
  type ElicitApproval,
} from './approvers/elicitation.js';
