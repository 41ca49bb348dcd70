// The MCP elicitation approver. The gateway (src/mcp/) implements `ElicitApproval` with the SDK's
// `server.elicitInput(elicitationRequest(card))` when the client declared the `elicitation`
// capability, and maps the result with `answerFromElicitation`. A client without elicitation needs
// another approver (console or terminal): never treat "cannot ask" as yes.
import { requestLine, type ApprovalCard } from '../card.js';
import type { Approver } from './approver.js';

/** Asks the MCP client's user; resolves `approved` only on an explicit yes. */
export type ElicitApproval = (
  card: ApprovalCard,
  signal?: AbortSignal,
) => Promise<'approved' | 'denied'>;

export function elicitationApprover(elicit: ElicitApproval, who = 'mcp_elicitation'): Approver {
  return {
    name: 'mcp_elicitation',
    async ask(card, options = {}) {
      const answer = await elicit(card, options.signal);
      return { decision: answer === 'approved' ? 'approved' : 'denied', by: who };
    },
  };
}

/** Form-mode elicitation parameters (MCP `elicitation/create`): one required boolean. */
export function elicitationRequest(card: ApprovalCard): {
  mode: 'form';
  message: string;
  requestedSchema: {
    type: 'object';
    properties: { approve: { type: 'boolean'; title: string; description: string } };
    required: ['approve'];
  };
} {
  const lines = [
    card.question,
    `Action: ${card.action} (${card.action_class}); operation ${card.operation_id}.`,
  ];
  const request = requestLine(card);
  if (request) lines.push(`Request: ${request}`);
  if (card.reason === 'retry_after_unknown') {
    lines.push(`Dispatch state so far: ${card.dispatch_state ?? 'unknown'}.`);
    if (card.planned_recovery) lines.push(`Planned recovery: ${card.planned_recovery.summary}`);
  }
  return {
    mode: 'form',
    message: lines.join('\n'),
    requestedSchema: {
      type: 'object',
      properties: {
        approve: {
          type: 'boolean',
          title: card.scope === 'session' ? 'Allow for this session' : 'Allow this call',
          description: `Approval ${card.approval_id}`,
        },
      },
      required: ['approve'],
    },
  };
}

/** `approved` only for `accept` with `approve: true`; decline, cancel or anything else is a no. */
export function answerFromElicitation(result: {
  action: string;
  content?: Record<string, unknown> | undefined;
}): 'approved' | 'denied' {
  return result.action === 'accept' && result.content?.['approve'] === true ? 'approved' : 'denied';
}
