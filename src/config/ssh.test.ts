import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { formatIssue } from './locate.js';
import { parseConfig } from './load.js';
import { sshVaultProblems } from './ssh-runtime.js';
import { commandPlaceholders, renderCommand } from './ssh-template.js';

const FP = `SHA256:${'A'.repeat(43)}`;

const GOOD = `ledger: 'memory:'
vault: { key_file: ./vault.key }
ssh:
  hosts:
    web-1:
      host: 10.0.0.5
      user: deploy
      key_ref: vault:web1-key
      host_key: { policy: pinned, fingerprint: '${FP}' }
  actions:
    - name: restart_service
      class: execute
      subject: the service
      description: Restart a service.
      host_ref: web-1
      command: systemctl restart {{input.service}} && deploy --token-env DB_PASS --tag {{input.tag}}
      input:
        type: object
        properties: { service: { type: string }, tag: { type: string }, pass: { type: string, writeOnly: true } }
        required: [service, tag, pass]
        additionalProperties: false
      secret_env: { DB_PASS: '{{input.pass}}', API_TOKEN: vault:deploy-token }
      deadline_ms: 30000
`;

function variant(from: string, to: string): string {
  expect(GOOD.includes(from)).toBe(true);
  return GOOD.replace(from, to);
}

function problems(text: string): string[] {
  const r = parseConfig(text, 'candor.yaml');
  expect(r.ok).toBe(false);
  return r.failure!.issues.map(formatIssue);
}

describe('candor.yaml SSH actions', () => {
  it('builds an SSH action: values shell-quoted in the command, secrets only in its environment', () => {
    const r = parseConfig(GOOD, 'candor.yaml');
    if (!r.ok) throw new Error(r.failure.message);
    const [a] = r.value.actions;
    const def = a!.definition;
    expect(def.name).toBe('restart_service');
    const dest = def.destination;
    if (dest.kind !== 'ssh') throw new Error('restart_service is not an SSH action');
    expect(dest.host_ref).toBe('web-1');
    expect(dest.secret_refs).toEqual({ API_TOKEN: 'vault:deploy-token' });
    const input = { service: "nginx'; rm -rf / #", tag: '$(id) `id` *', pass: 's3cret-pass' };
    const req = def.request(input, {
      operation_id: 'op_1',
      correlation_id: 'c',
      idempotency_key: null,
    });
    if (!('command' in req)) throw new Error('an SSH action builds a command');
    expect(req.command).toBe(
      `systemctl restart 'nginx'\\''; rm -rf / #' && deploy --token-env DB_PASS --tag '$(id) \`id\` *'`,
    );
    expect(req.command).not.toContain('s3cret-pass');
    expect(dest.secret_env?.(input)).toEqual({ DB_PASS: 's3cret-pass' });
  });

  it('a secret input or a vault value in the command text is refused at load, with its place', () => {
    expect(
      problems(variant('--tag {{input.tag}}', '--tag {{input.tag}} --pass {{input.pass}}')),
    ).toEqual([
      'candor.yaml:16:16: ssh.actions[0].command: {{input.pass}}: "pass" is secret and would be on a command line; bind it in secret_env and use "$NAME"',
    ]);
    expect(problems(variant('--tag {{input.tag}}', '--tag {{vault:deploy-token}}'))).toEqual([
      'candor.yaml:16:16: ssh.actions[0].command: a vault value never goes in the command text (it would be on a command line): bind it in secret_env and use "$NAME"',
    ]);
    // writeOnly without a secret_env entry would leave the value nowhere safe.
    expect(problems(variant("DB_PASS: '{{input.pass}}', ", ''))).toEqual([
      'candor.yaml:19:73: ssh.actions[0].input.properties.pass: "pass" is secret (writeOnly): pass it in secret_env (NAME: "{{input.pass}}") and use "$NAME" in the command',
    ]);
  });

  it('unknown host_ref, unknown fields, bad secret_env values and a missing vault section are errors', () => {
    expect(problems(variant('host_ref: web-1', 'host_ref: web-2'))).toEqual([
      'candor.yaml:15:17: ssh.actions[0].host_ref: no host named "web-2" under ssh.hosts',
    ]);
    expect(problems(variant('{{input.tag}}', '{{input.tga}}'))).toEqual([
      'candor.yaml:16:16: ssh.actions[0].command: {{input.tga}}: the input schema has no property "tga"',
    ]);
    expect(problems(variant('vault:deploy-token', 'env:TOKEN'))).toEqual([
      'candor.yaml:22:59: ssh.actions[0].secret_env.API_TOKEN: a secret_env value is vault:NAME or exactly "{{input.FIELD}}"',
    ]);
    expect(problems(variant('key_ref: vault:web1-key', 'key_ref: file:/k'))).toEqual([
      'candor.yaml:8:16: ssh.hosts.web-1.key_ref: an SSH key is referenced as vault:NAME (an ssh_key entry bound to ssh:HOST_REF); the key itself never goes in this file',
    ]);
    expect(problems(variant('vault: { key_file: ./vault.key }\n', ''))).toEqual([
      'candor.yaml:3:3: ssh: SSH keys are vault: references: add a `vault:` section',
    ]);
    expect(problems(variant('      deadline_ms: 30000\n', '      deadline: 30000\n'))).toEqual([
      'candor.yaml:23:7: ssh.actions[0].deadline: unknown key',
    ]);
  });

  it('a placeholder the shell would not read as one quoted word is refused', () => {
    for (const [cmd, where] of [
      [`echo '{{input.tag}}'`, "inside '…' quotes"],
      [`echo "v={{input.tag}}"`, 'inside "…" quotes'],
      [`echo \\\\{{input.tag}}`, 'after a backslash'],
      [`cat <<EOF\\n{{input.tag}}\\nEOF`, 'after a here-document (<<)'],
    ] as const) {
      const text = variant(
        'command: systemctl restart {{input.service}} && deploy --token-env DB_PASS --tag {{input.tag}}',
        `command: ${JSON.stringify(`${cmd} {{input.service}}`)}`,
      );
      const out = problems(text);
      expect(out[0]).toContain(`candor.yaml:16:16: ssh.actions[0].command: {{input.tag}} ${where}`);
      // The word outside quotes is fine, except where the here-document makes every place unsafe.
      expect(out.length).toBe(where.includes('here-document') ? 2 : 1);
    }
    expect(commandPlaceholders(`a "x" 'y' {{input.a}} "\\"{{q}}"`)).toEqual([
      { name: 'input.a', unsafe: null, at: 10 },
      { name: 'q', unsafe: 'inside "…" quotes', at: 25 },
    ]);
  });

  // Issue 30: a placeholder in a shell-active context renders a quoted word the shell reads as
  // something else (bash's $'…' lets a value ending in \ escape the closing quote).
  it('a placeholder in any shell-active context is refused at load with FILE:LINE:COL', () => {
    const text = variant('--tag {{input.tag}}', '--tag ${{input.tag}}');
    expect(problems(text)).toEqual([
      'candor.yaml:16:16: ssh.actions[0].command: {{input.tag}} right after $ (character 74 of the command): the shell would not read the value as one quoted word; put the placeholder where a plain word goes, outside quotes, backticks, ${…}, $((…)) and comments and not right after $ (it is quoted for you)',
    ]);
    const unsafe = (cmd: string) => commandPlaceholders(cmd).map((p) => p.unsafe);
    expect(unsafe('echo ${{input.x}}')).toEqual(['right after $']);
    expect(unsafe("echo $'a{{input.x}}'")).toEqual(["inside $'…' quotes"]);
    expect(unsafe('echo `echo {{input.x}}`')).toEqual(['inside backticks']);
    expect(unsafe('echo "`echo {{input.x}}`"')).toEqual(['inside backticks']);
    expect(unsafe('echo ${v:-{{input.x}}}')).toEqual(['inside ${…}']);
    expect(unsafe('echo "${v:-{{input.x}}}"')).toEqual(['inside ${…}']);
    expect(unsafe('echo $(( {{input.x}} + 1 ))')).toEqual(['inside an arithmetic expansion']);
    expect(unsafe('echo $(( (1 + 2) * {{input.x}} ))')).toEqual(['inside an arithmetic expansion']);
    expect(unsafe('echo \\{{input.x}}')).toEqual(['after a backslash']);
    expect(unsafe('true # {{input.x}}\necho ok')).toEqual([
      'inside a comment (a newline in the value would end it)',
    ]);
    // A case pattern's `)` ends no parenthesis: later placeholders are refused, not guessed.
    expect(unsafe('x="$(case a in a) echo "{{input.x}}";; esac)"')[0]).toMatch(/case statement/);
    // Plain words stay allowed: top level, subshells, command substitutions (also in "…").
    expect(
      unsafe(
        'a {{input.x}} ( b {{input.x}} ) "$(c {{input.x}})" $(d {{input.x}}) x=$(( 1 + 2 )) {{input.x}}',
      ),
    ).toEqual([null, null, null, null, null]);
  });

  it("quotes with '…' only, never bash's $'…': a value ending in a backslash stays one word", () => {
    // Run through the shells a host may have as sh: the value arrives as one word, nothing runs.
    const value = "a\\' ; echo INJECTED #\\";
    const rendered = renderCommand('printf %s {{input.v}}', { v: value });
    expect(rendered.startsWith("printf %s '")).toBe(true);
    for (const shell of ['sh', 'bash']) {
      const r = spawnSync(shell, ['-c', rendered], { encoding: 'utf8' });
      if (r.error) continue;
      expect(r.stdout).toBe(value);
    }
  });

  it('renders refuse missing, empty and NUL values instead of changing the command', () => {
    expect(() => renderCommand('rm -r /data/{{input.d}}', {})).toThrow(/needs a value/);
    expect(() => renderCommand('rm -r /data/{{input.d}}', { d: '' })).toThrow(/non-empty/);
    expect(() => renderCommand('x {{input.d}}', { d: 'a\0b' })).toThrow(/NUL/);
    expect(renderCommand('x {{input.n}} {{input.o}}', { n: 3, o: { a: "'" } })).toBe(
      `x '3' '{"a":"'\\''"}'`,
    );
  });

  it('checks vault references against what the vault holds: name, type and host binding', () => {
    const r = parseConfig(GOOD, 'candor.yaml');
    if (!r.ok) throw new Error(r.failure.message);
    const info = (name: string, type: 'ssh_key' | 'ssh_secret', host = 'web-1') => ({
      name,
      type,
      bindings: [{ kind: 'ssh' as const, host_ref: host }],
      created_at: 0,
      rotated_at: null,
    });
    expect(
      sshVaultProblems(r.value.config, [
        info('web1-key', 'ssh_key'),
        info('deploy-token', 'ssh_secret'),
      ]),
    ).toEqual([]);
    expect(
      sshVaultProblems(r.value.config, [
        info('web1-key', 'ssh_secret'),
        info('deploy-token', 'ssh_secret', 'web-2'),
      ]).map((p) => `${p.path.join('.')}: ${p.problem}`),
    ).toEqual([
      'ssh.hosts.web-1.key_ref: vault entry "web1-key" is ssh_secret; this needs ssh_key',
      'ssh.actions.0.secret_env.API_TOKEN: vault entry "deploy-token" is not bound to ssh:web-1 (candor vault set … --bind ssh:web-1)',
    ]);
    expect(sshVaultProblems(r.value.config, [info('web1-key', 'ssh_key')])).toEqual([
      {
        path: ['ssh', 'actions', 0, 'secret_env', 'API_TOKEN'],
        problem:
          'the vault holds no credential named "deploy-token" (candor vault list shows what it holds)',
        missing: true,
      },
    ]);
  });
});
