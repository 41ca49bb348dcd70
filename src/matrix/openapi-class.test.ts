// The class guess over real operations of three public APIs, each with the class a careful person
// would give it; the accuracy is printed per API and overall, and must stay at 95 % or more. Every
// row names an operation by its operationId and takes method, path and summary from the published
// description, read from a devDependency (no network): GitHub's (@octokit/openapi), Twilio's
// api_v2010 (@twilio-alpha/mcp ships twilio-oai's JSON) and Directus's (@directus/specs).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
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

/**
 * Twilio's voice and messaging API (api_v2010) as Twilio publishes it; the description ships in
 * devDependency @twilio-alpha/mcp (twilio-oai/spec/json). Keyed by operationId.
 */
const TWILIO_EXPECTED: Record<string, string> = {
  CreateAccount: 'create',
  UpdateAccount: 'set_state',
  FetchAccount: 'read',
  CreateMessage: 'notify',
  DeleteMessage: 'destructive',
  UpdateMessage: 'set_state',
  ListMessage: 'read',
  CreateCall: 'notify',
  DeleteCall: 'destructive',
  FetchCall: 'read',
  CreateNewKey: 'credential_change',
  DeleteKey: 'credential_change',
  CreateNewSigningKey: 'credential_change',
  DeleteSigningKey: 'credential_change',
  CreateToken: 'credential_change',
  CreateSipCredential: 'credential_change',
  DeleteSipCredential: 'credential_change',
  CreateIncomingPhoneNumber: 'financial',
  DeleteIncomingPhoneNumber: 'destructive',
  CreatePayments: 'financial',
  CreateQueue: 'create',
  UpdateQueue: 'set_state',
  DeleteQueue: 'destructive',
  CreateApplication: 'create',
  UpdateApplication: 'set_state',
  DeleteApplication: 'destructive',
  CreateCallRecording: 'create',
  DeleteRecording: 'destructive',
  CreateUsageTrigger: 'create',
  DeleteUsageTrigger: 'destructive',
  CreateSipDomain: 'create',
  DeleteSipDomain: 'destructive',
};

/**
 * Directus (the headless CMS): its REST API as the project publishes it in devDependency
 * @directus/specs (dist/openapi.json). Keyed by operationId.
 */
const DIRECTUS_EXPECTED: Record<string, string> = {
  getItems: 'read',
  createItem: 'create',
  updateItem: 'set_state',
  updateItems: 'set_state',
  deleteItem: 'destructive',
  deleteItems: 'destructive',
  createUser: 'create',
  updateUser: 'set_state',
  deleteUser: 'destructive',
  getMe: 'read',
  invite: 'permission_change',
  createRole: 'permission_change',
  updateRole: 'permission_change',
  deleteRole: 'permission_change',
  createPermission: 'permission_change',
  updatePermission: 'permission_change',
  deletePermission: 'permission_change',
  createComment: 'append',
  updateComment: 'set_state',
  deleteComment: 'destructive',
  createFile: 'create',
  deleteFile: 'destructive',
  createCollection: 'create',
  deleteCollection: 'destructive',
  createField: 'create',
  deleteField: 'destructive',
  createFlow: 'create',
  updateFlow: 'set_state',
  deleteFlow: 'destructive',
  updateSetting: 'set_state',
  registerUser: 'create',
  serverInfo: 'read',
};

interface Doc {
  paths: Record<string, Record<string, { operationId?: string; summary?: string }>>;
}

/** The operations `expected` names, as the document publishes them; one it lacks fails the test. */
function specRows(
  source: string,
  [pkg, inPkg]: [string, string],
  expected: Record<string, string>,
): Row[] {
  // Through package.json: @directus/specs exports no subpath for its JSON.
  const file = join(dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`)), inPkg);
  const doc = JSON.parse(readFileSync(file, 'utf8')) as Doc;
  const out: Row[] = [];
  for (const [path, item] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(item)) {
      const want = op.operationId !== undefined ? expected[op.operationId] : undefined;
      if (want === undefined) continue;
      out.push([
        source,
        { method, path, summary: op.summary ?? '', operation_id: op.operationId! },
        want,
      ]);
    }
  const found = new Set(out.map((r) => r[1].operation_id));
  const missing = Object.keys(expected).filter((id) => !found.has(id));
  if (missing.length > 0)
    throw new Error(`${source}: no operation ${missing.join(', ')} in ${pkg}/${inPkg}`);
  return out;
}

const SPECS: Array<[source: string, file: [string, string], expected: Record<string, string>]> = [
  ['GitHub', ['@octokit/openapi', 'generated/api.github.com.json'], GITHUB_EXPECTED],
  ['Twilio', ['@twilio-alpha/mcp', 'twilio-oai/spec/json/twilio_api_v2010.json'], TWILIO_EXPECTED],
  ['Directus', ['@directus/specs', 'dist/openapi.json'], DIRECTUS_EXPECTED],
];

const rows = (): Row[] => SPECS.flatMap(([s, file, expected]) => specRows(s, file, expected));

describe('class guesses over real operations of three published API descriptions', () => {
  it('is right on at least 95 % of the table, per API and overall, and prints the misses', () => {
    const table = rows();
    for (const [source, , expected] of SPECS)
      expect(table.filter((r) => r[0] === source)).toHaveLength(Object.keys(expected).length);
    expect(table.length).toBeGreaterThanOrEqual(100);
    const right = (r: Row): boolean => guessClass(r[1]).class === r[2];
    const score = (list: Row[]): string =>
      `${((list.filter(right).length / list.length) * 100).toFixed(1)} % (${list.filter(right).length}/${list.length})`;
    const misses = table.filter((r) => !right(r));
    console.log(
      `class guess accuracy: ${score(table)}; ` +
        SPECS.map(([s]) => `${s} ${score(table.filter((r) => r[0] === s))}`).join(', ') +
        '\n' +
        misses
          .map(
            ([s, e, x]) =>
              `  miss ${s}: ${e.method.toUpperCase()} ${e.path} "${e.summary}" → ${guessClass(e).class} (${guessClass(e).reason}), expected ${x}`,
          )
          .join('\n'),
    );
    expect((table.length - misses.length) / table.length).toBeGreaterThanOrEqual(0.95);
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
