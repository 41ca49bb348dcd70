// The action class `candor init --openapi` guesses for an operation the document does not classify
// (`x-candor-class`). Evidence, strongest first: the method (it decides the family, and nothing
// outweighs it: a GET is a read, a DELETE never becomes a notification), then the path's shape and
// nouns (`/collaborators/{user}`, `/secrets/{name}`, `/charges`, `/runs/{id}/rerun`), then the
// summary's first verb. Descriptions are never read: their words ("access", "order") describe
// context, not the effect. The reason names the evidence, for the TODO comment a person checks.

export interface ClassChoice {
  class: string;
  /** Why: `declared by x-candor-class`, or the evidence of the guess. */
  reason: string;
  guessed: boolean;
}

export interface ClassEvidence {
  method: string;
  path: string;
  summary: string;
  operation_id: string;
  declared_class?: string | undefined;
}

const words = (list: string): ReadonlySet<string> => new Set(list.split(/\s+/));

/** Nouns of the last fixed path segment that name what an operation changes. */
const CREDENTIAL = words(
  'key keys secret secrets token tokens credential credentials password passwords authorizations authorization certificates ephemeral_keys api_keys',
);
const PERMISSION = words(
  'collaborators collaborator permission permissions role roles members member memberships membership invitations invitation blocks admins grants acl acls',
);
/** Money moves when these appear anywhere in the path. */
const FINANCIAL = words(
  'charges payments payment_intents payment_links refunds payouts transfers invoices subscriptions checkout order orders topups credit_notes purchases billing sponsorships',
);
const NOTIFY = words(
  'messages message notify notifications sms emails_send pings ping tests calls mail broadcasts attempts',
);
const EXECUTE = words(
  'dispatches dispatch rerun rerequest run restart reboot exec execute invoke trigger builds approve commands jobs',
);
const DESTROY = words('cancel purge destroy delete remove void');
const APPEND = words('comments comment notes replies reactions entries events logs');
/** Adding to these sets converges (adding a label twice leaves one label). */
const SET_MEMBERS = words('labels assignees topics reviewers requested_reviewers');
/** DELETE on these undoes a flag of the caller (unstar, unfollow): a state, not a loss. */
const FLAG_COLLECTIONS = words('following starred watched');

/** Summary verbs, per method family: they refine, never overrule, the method. */
const POST_VERBS: Record<string, string> = {
  send: 'notify',
  notify: 'notify',
  email: 'notify',
  ping: 'notify',
  redeliver: 'notify',
  cancel: 'destructive',
  void: 'destructive',
  delete: 'destructive',
  remove: 'destructive',
  destroy: 'destructive',
  purge: 'destructive',
  run: 'execute',
  rerun: 'execute',
  're-run': 'execute',
  trigger: 'execute',
  execute: 'execute',
  dispatch: 'execute',
  restart: 'execute',
  approve: 'execute',
  transfer: 'permission_change',
  invite: 'permission_change',
  revoke: 'credential_change',
  rotate: 'credential_change',
  pay: 'financial',
  purchase: 'financial',
  buy: 'financial',
  charge: 'financial',
  refund: 'financial',
  capture: 'financial',
};
const UPDATE_VERBS = words('update edit modify set replace rename change');

const PERMISSION_WORDS = /\b(permissions?|roles?|collaborators?|members?|memberships?|access)\b/i;
const CREDENTIAL_WORDS =
  /\b(secrets?|tokens?|passwords?|credentials?|(ssh|gpg|deploy|api) keys?)\b/i;

/** `{id}`, and `{Sid}.json` (a record id with a format suffix). */
const isParam = (s: string): boolean => /^\{[^}]+\}(\.\w+)?$/.test(s);
/** `signing_keys`, `signing-keys` and `SigningKeys.json` all give the noun `keys`. */
const nounWords = (segment: string): string[] => [
  segment.toLowerCase(),
  ...segment
    .replace(/([a-z])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .split(/[-_.]/),
];
const hit = (segment: string | undefined, set: ReadonlySet<string>): string | undefined =>
  segment === undefined ? undefined : nounWords(segment).find((w) => set.has(w));

/** The first word of the summary, or the verb of the operationId (`issues/create` → create). */
function verbOf(e: ClassEvidence): string {
  const fromSummary = /^\s*([A-Za-z-]+)/.exec(e.summary)?.[1]?.toLowerCase();
  // "Updates the application", "Sends a message": the verb without its third-person s.
  if (fromSummary) return /[^s]s$/.test(fromSummary) ? fromSummary.slice(0, -1) : fromSummary;
  const tail = e.operation_id.split(/[/.]/).at(-1) ?? e.operation_id;
  return (
    tail
      .replace(/([a-z])([A-Z])/g, '$1 $2')
      .split(/[\s_-]+/)[0]
      ?.toLowerCase() ?? ''
  );
}

export function guessClass(e: ClassEvidence): ClassChoice {
  if (e.declared_class !== undefined)
    return { class: e.declared_class, reason: 'declared by x-candor-class', guessed: false };
  const method = e.method.toUpperCase();
  const guess = (cls: string, evidence: string): ClassChoice => ({
    class: cls,
    reason: `guessed from ${method}${evidence ? ` and ${evidence}` : ''}`,
    guessed: true,
  });
  if (method === 'GET' || method === 'HEAD') return guess('read', '');
  const segments = e.path.split('/').filter((s) => s !== '');
  const fixed = segments.filter((s) => !isParam(s));
  const last = fixed.at(-1);
  const onItem = isParam(segments.at(-1) ?? '');
  const noun = (set: ReadonlySet<string>): string | undefined => hit(last, set);
  const verb = verbOf(e);
  const money = fixed.find((s) => hit(s, FINANCIAL) !== undefined);
  const said = `the summary verb "${verb}"`;

  let w: string | undefined;
  if ((w = noun(CREDENTIAL))) return guess('credential_change', `the path noun "${w}"`);
  if ((w = noun(PERMISSION))) return guess('permission_change', `the path noun "${w}"`);
  if (method === 'DELETE') {
    if (money && (!onItem || last !== money)) return guess('financial', `the path noun "${money}"`);
    if ((w = noun(SET_MEMBERS))) return guess('set_state', `the path noun "${w}" (a set)`);
    if ((w = noun(FLAG_COLLECTIONS)))
      return guess('set_state', `the path noun "${w}" (undoing the caller's own flag)`);
    if (CREDENTIAL_WORDS.test(e.summary)) return guess('credential_change', said);
    if (PERMISSION_WORDS.test(e.summary)) return guess('permission_change', said);
    if (!onItem && last !== undefined && !/s$/i.test(last))
      return guess('set_state', `a setting path ("${last}", not a record)`);
    return guess('destructive', '');
  }
  if (method === 'PUT' || method === 'PATCH') {
    if (money) return guess('financial', `the path noun "${money}"`);
    if (CREDENTIAL_WORDS.test(e.summary)) return guess('credential_change', said);
    if (PERMISSION_WORDS.test(e.summary)) return guess('permission_change', said);
    return guess('set_state', '');
  }
  // POST: the path decides first, then the summary verb; the default is create.
  if ((w = noun(DESTROY))) return guess('destructive', `the path verb "${w}"`);
  if (money) return guess('financial', `the path noun "${money}"`);
  // "Update a Message resource" on /Messages/{Sid}: the record changes, nothing is sent.
  if (onItem && UPDATE_VERBS.has(verb)) return guess('set_state', `${said} on one record`);
  if ((w = noun(NOTIFY))) return guess('notify', `the path noun "${w}"`);
  if ((w = noun(EXECUTE))) return guess('execute', `the path noun "${w}"`);
  if ((w = noun(SET_MEMBERS))) return guess('set_state', `the path noun "${w}" (a set)`);
  const byVerb = POST_VERBS[verb];
  if (byVerb !== undefined) return guess(byVerb, said);
  if ((w = noun(APPEND))) return guess('append', `the path noun "${w}"`);
  // POST /items/{collection} "Create an Item": the parameter names where, the verb says what.
  if (onItem && verb === 'create') return guess('create', `${said}`);
  if (onItem) return guess('append', 'a path ending in a record');
  return guess('create', '');
}
