// The wrapper script is plain POSIX sh: these tests run it with the local /bin/sh (no SSH) through
// the same exec string the transport sends, so quoting, the marker protocol and the parser are
// checked together.
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  parseWrapperOutput,
  shQuote,
  WRAPPER_PROTOCOL,
  WRAPPER_EXEC,
  WRAPPER_SCRIPT,
  wrapperRequest,
  type WrapperCall,
} from './wrapper.js';

let dir = '';
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'candor-wrap-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const NONCE = '0123456789abcdef';
function wrap(call: Partial<WrapperCall> & { mode: WrapperCall['mode'] }, path = process.env.PATH) {
  const full: WrapperCall = {
    nonce: NONCE,
    markerDir: join(dir, 'ops'),
    operationId: 'op_1',
    ...call,
  };
  const r = spawnSync('sh', ['-c', WRAPPER_EXEC], {
    env: { PATH: path },
    input: wrapperRequest(full),
  });
  const parsed = parseWrapperOutput(r.stdout, NONCE);
  if (!parsed.ok) throw new Error(`unparsable (${parsed.failure}): ${r.stdout.toString()}`);
  return { status: r.status, report: parsed.value, raw: r.stdout };
}

describe('shQuote', () => {
  it('round-trips arbitrary words through sh', () => {
    for (const w of ["it's", '$HOME `id` "q"', 'a\nb', '', "''\\"]) {
      const r = spawnSync('sh', ['-c', `printf %s ${shQuote(w)}`]);
      expect(r.stdout.toString()).toBe(w);
    }
  });
});

describe('wrapper script', () => {
  it('is written without ${ so String.raw keeps it verbatim, and names the protocol', () => {
    expect(WRAPPER_SCRIPT).not.toContain('${');
    expect(WRAPPER_SCRIPT).toContain(`P="${WRAPPER_PROTOCOL} $N"`);
  });

  it('runs once, frames output exactly and exits with the command status', () => {
    const cmd = `echo run >> ${shQuote(join(dir, 'count'))}; printf 'out\\nno-newline'; echo err >&2; exit 3`;
    const first = wrap({ mode: 'run', command: cmd });
    expect(first.status).toBe(3);
    expect(first.report.kind).toBe('ran');
    expect(first.report.exit).toBe(3);
    expect(first.report.stdout.toString()).toBe('out\nno-newline');
    expect(first.report.stderr.toString()).toBe('err\n');

    const again = wrap({ mode: 'run', command: cmd });
    expect(again.status).toBe(3);
    expect(again.report.kind).toBe('existing');
    expect(again.report.marker).toMatchObject({ state: 'completed', exit_status: 3 });
    expect(again.report.stdout.toString()).toBe('out\nno-newline');
    expect(readFileSync(join(dir, 'count'), 'utf8')).toBe('run\n');
  });

  it('concurrent runs of one operation id execute the command exactly once', async () => {
    const call: WrapperCall = {
      mode: 'run',
      nonce: NONCE,
      markerDir: join(dir, 'ops'),
      operationId: 'op_race',
      command: `echo run >> ${shQuote(join(dir, 'count'))}`,
    };
    const outs = await Promise.all(
      Array.from(
        { length: 6 },
        () =>
          new Promise<Buffer>((resolve) => {
            const chunks: Buffer[] = [];
            const c = spawn('sh', ['-c', WRAPPER_EXEC]);
            c.stdin.end(wrapperRequest(call));
            c.stdout.on('data', (d: Buffer) => chunks.push(d));
            c.on('close', () => resolve(Buffer.concat(chunks)));
          }),
      ),
    );
    const kinds = outs.map((o) => parseWrapperOutput(o, NONCE).value?.kind);
    expect(kinds.filter((k) => k === 'ran')).toHaveLength(1);
    expect(kinds.filter((k) => k === 'existing')).toHaveLength(5);
    expect(readFileSync(join(dir, 'count'), 'utf8')).toBe('run\n');
  });

  it('output that imitates status lines stays command output', () => {
    const fake = `${WRAPPER_PROTOCOL} ${NONCE} exit 0`;
    const r = wrap({ mode: 'run', command: `echo ${shQuote(fake)}; exit 9` });
    expect(r.report.exit).toBe(9);
    expect(r.report.stdout.toString()).toBe(`${fake}\n`);
  });

  it('reconcile reports absent, then completed with the recorded status', () => {
    expect(wrap({ mode: 'reconcile' }).report.marker).toEqual({ state: 'absent' });
    wrap({ mode: 'run', command: 'exit 0' });
    const r = wrap({ mode: 'reconcile' });
    expect(r.status).toBe(0);
    expect(r.report.marker).toMatchObject({ state: 'completed', exit_status: 0 });
  });

  it('a read or converge whose session hangs up (or is terminated) mid-command leaves no output behind', async () => {
    // The command's output waits in a temporary folder on the host until it is framed; a dropped
    // connection (sshd sends SIGHUP) or a TERM must not leave it there (it may hold secrets).
    for (const [mode, signal] of [
      ['read', 'SIGHUP'],
      ['converge', 'SIGTERM'],
    ] as const) {
      const tmp = join(dir, `tmp-${mode}`);
      mkdirSync(tmp);
      const call: WrapperCall = {
        mode,
        nonce: NONCE,
        markerDir: join(dir, 'ops'),
        operationId: `op_${mode}`,
        // Writes some output, then waits (bounded) for the signal.
        command: 'echo secret-output; i=0; while [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done',
        ...(mode === 'converge' ? { check: 'exit 1' } : {}),
      };
      const child = spawn('sh', ['-c', WRAPPER_SCRIPT, 'candor-wrap'], {
        stdio: ['pipe', 'ignore', 'ignore'],
        env: { PATH: process.env.PATH, TMPDIR: tmp },
        detached: true,
      });
      child.stdin.end(wrapperRequest(call));
      const outFile = (): string => {
        const made = readdirSync(tmp);
        return made.length === 1 ? readIfExists(join(tmp, made[0]!, 'stdout')) : '';
      };
      for (let i = 0; i < 250 && !outFile().includes('secret-output'); i++) await tick(20);
      expect(outFile()).toContain('secret-output');
      // The whole session's process group, as sshd does when the connection drops.
      process.kill(-child.pid!, signal);
      const [code, died] = await new Promise<[number | null, NodeJS.Signals | null]>((r) =>
        child.once('exit', (c, s) => r([c, s])),
      );
      expect(readdirSync(tmp)).toEqual([]);
      // It still dies of the signal, as without the cleanup: the SSH channel reports the same
      // exit-signal, so the outcome reads as before (cut off, not a misframed answer).
      expect([code, died]).toEqual([null, signal]);
    }
  });

  it('reports a start without completion and whether its processes live', async () => {
    const go = join(dir, 'go');
    const call: WrapperCall = {
      mode: 'run',
      nonce: NONCE,
      markerDir: join(dir, 'ops'),
      operationId: 'op_slow',
      // Bounded, so a failing test never leaves the loop running.
      command: `i=0; while [ ! -f ${shQuote(go)} ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done`,
    };
    const child = spawn('sh', ['-c', WRAPPER_SCRIPT, 'candor-wrap'], {
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    child.stdin.end(wrapperRequest(call));
    const startFile = join(dir, 'ops', 'op_slow', 'start');
    for (let i = 0; i < 250 && !readIfExists(startFile).includes('child'); i++) await tick(20);

    const running = wrap({ mode: 'run', operationId: 'op_slow', command: 'exit 0' });
    expect(running.status).toBe(75);
    expect(running.report.marker).toMatchObject({ state: 'started', process: 'alive' });
    const marker = running.report.marker;
    if (marker?.state !== 'started') throw new Error('expected started');
    expect(marker.pid).toBe(child.pid);
    expect(marker.child_pid).toBeGreaterThan(0);

    // The remote side dies (OOM killer, reboot): nothing records completion.
    process.kill(marker.pid!, 'SIGKILL');
    process.kill(marker.child_pid!, 'SIGKILL');
    await new Promise((r) => child.once('exit', r));
    for (let i = 0; i < 50; i++) {
      const m = wrap({ mode: 'reconcile', operationId: 'op_slow' }).report.marker;
      if (m?.state === 'started' && m.process === 'gone') break;
      await tick(20);
    }
    expect(wrap({ mode: 'reconcile', operationId: 'op_slow' }).report.marker).toMatchObject({
      state: 'started',
      process: 'gone',
    });
    writeFileSync(go, '');
  });

  it('a recorded process reaped between its two reads is gone; one without /proc stays alive', async () => {
    // The marker of a run whose wrapper and command are `sleep` processes of this test.
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const marker = (op: string, pids: number[]) => {
      mkdirSync(join(dir, 'ops', op), { recursive: true, mode: 0o700 });
      writeFileSync(
        join(dir, 'ops', op, 'start'),
        `2026-01-01T00:00:00Z ${pids[0]} ${boot}\nchild ${pids[1]}\n`,
      );
    };
    // A `sed` in front of the real one. Asked for /proc/PID/stat, it answers as if that file could
    // not be read: with SHIM_REAP it first kills PID and waits until its parent (this test) has
    // reaped it, the way an init process reaps a killed wrapper at any moment; without, the
    // process lives on, as on a host without /proc.
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    const realSed = spawnSync('sh', ['-c', 'command -v sed'], { encoding: 'utf8' }).stdout.trim();
    writeFileSync(
      join(bin, 'sed'),
      [
        '#!/bin/sh',
        'for a; do last=$a; done',
        'case $last in /proc/*/stat)',
        '  if [ -f "$SHIM_REAP" ]; then p=${last#/proc/}; p=${p%/stat}; kill -9 "$p"',
        '    i=0; while [ -e "$last" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done; fi',
        '  exit 2;;',
        'esac',
        `exec ${shQuote(realSed)} "$@"`,
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const path = `${bin}:${process.env.PATH}`;
    const sleeper = () => spawn('sleep', ['30'], { stdio: 'ignore' });
    const procs = [sleeper(), sleeper(), sleeper(), sleeper()];
    try {
      marker('op_noproc', [procs[0]!.pid!, procs[1]!.pid!]);
      expect(
        wrap({ mode: 'reconcile', operationId: 'op_noproc' }, path).report.marker,
      ).toMatchObject({ state: 'started', process: 'alive' });
      expect(procs[0]!.exitCode ?? procs[0]!.signalCode).toBeNull();

      marker('op_reaped', [procs[2]!.pid!, procs[3]!.pid!]);
      const reap = join(dir, 'reap');
      writeFileSync(reap, '');
      const gone = await new Promise<ReturnType<typeof wrap>>((resolve, reject) => {
        // The shim waits for this process to reap its children, so the wrapper runs beside it.
        const child = spawn('sh', ['-c', WRAPPER_EXEC], {
          env: { PATH: path, SHIM_REAP: reap },
          stdio: ['pipe', 'pipe', 'ignore'],
        });
        const out: Buffer[] = [];
        child.stdout.on('data', (b: Buffer) => out.push(b));
        child.on('error', reject);
        child.on('close', (status) => {
          const parsed = parseWrapperOutput(Buffer.concat(out), NONCE);
          if (!parsed.ok) reject(new Error(`unparsable: ${Buffer.concat(out).toString()}`));
          else resolve({ status, report: parsed.value, raw: Buffer.concat(out) });
        });
        child.stdin.end(
          wrapperRequest({
            mode: 'reconcile',
            nonce: NONCE,
            markerDir: join(dir, 'ops'),
            operationId: 'op_reaped',
          }),
        );
      });
      expect(gone.report.marker).toMatchObject({ state: 'started', process: 'gone' });
      expect(procs[2]!.signalCode).toBe('SIGKILL');
      expect(procs[3]!.signalCode).toBe('SIGKILL');
    } finally {
      for (const p of procs) p.kill('SIGKILL');
    }
  });

  it('a live process under a recorded pid that started at another time is a reused pid: gone', () => {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const marker = (op: string, lines: string) => {
      mkdirSync(join(dir, 'ops', op), { recursive: true, mode: 0o700 });
      writeFileSync(join(dir, 'ops', op, 'start'), lines);
    };
    const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' });
    const pid = sleeper.pid!;
    const reconcile = (op: string) => wrap({ mode: 'reconcile', operationId: op }).report.marker;
    try {
      // The run's own record: its start time matches, so the process is the one that started.
      marker('op_same', `t ${pid} ${boot} ${startTime(pid)}\nchild ${pid} ${startTime(pid)}\n`);
      expect(reconcile('op_same')).toMatchObject({ state: 'started', process: 'alive' });
      // The same pid, recorded with another start time: the recorded processes are gone.
      const other = String(Number(startTime(pid)) - 1);
      marker('op_reused', `t ${pid} ${boot} ${other}\nchild ${pid} ${other}\n`);
      expect(reconcile('op_reused')).toMatchObject({ state: 'started', process: 'gone' });
      // A marker written before start times were recorded, or on a host without /proc: by pid.
      marker('op_old', `t ${pid} ${boot}\nchild ${pid}\n`);
      expect(reconcile('op_old')).toMatchObject({ state: 'started', process: 'alive' });
      marker('op_noproc', `t ${pid} ${boot} -\nchild ${pid} -\n`);
      expect(reconcile('op_noproc')).toMatchObject({ state: 'started', process: 'alive' });
    } finally {
      sleeper.kill('SIGKILL');
    }
  });

  it('records the start time of the wrapper and of its command in the marker', async () => {
    const go = join(dir, 'go');
    const child = spawn('sh', ['-c', WRAPPER_SCRIPT, 'candor-wrap'], {
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    child.stdin.end(
      wrapperRequest({
        mode: 'run',
        nonce: NONCE,
        markerDir: join(dir, 'ops'),
        operationId: 'op_times',
        command: `i=0; while [ ! -f ${shQuote(go)} ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done`,
      }),
    );
    const startFile = join(dir, 'ops', 'op_times', 'start');
    for (let i = 0; i < 250 && !readIfExists(startFile).includes('child'); i++) await tick(20);
    const [first = '', second = ''] = readIfExists(startFile).trim().split('\n');
    const [, w, , ws] = first.split(' ');
    const [, c, cs] = second.split(' ');
    try {
      expect(Number(w)).toBe(child.pid);
      expect({ ws, cs }).toEqual({ ws: startTime(w!), cs: startTime(c!) });
    } finally {
      writeFileSync(go, '');
      await new Promise((r) => child.once('exit', r));
    }
  });

  it('refuses unsafe operation ids and unusable marker dirs before running anything', () => {
    const bad = wrap({
      mode: 'run',
      operationId: '../x',
      command: `touch ${shQuote(join(dir, 'ran'))}`,
    });
    expect(bad.status).toBe(70);
    expect(bad.report).toMatchObject({ kind: 'error', error: 'bad_operation_id' });
    writeFileSync(join(dir, 'file'), '');
    const blocked = wrap({
      mode: 'run',
      markerDir: join(dir, 'file', 'ops'),
      command: `touch ${shQuote(join(dir, 'ran'))}`,
    });
    expect(blocked.report).toMatchObject({ kind: 'error', error: 'marker_unavailable', exit: 70 });
    expect(existsSync(join(dir, 'ran'))).toBe(false);
  });

  it('converge skips the command when the check already passes and reports the check after', () => {
    const flag = join(dir, 'flag');
    const call = {
      mode: 'converge',
      command: `touch ${shQuote(flag)}`,
      check: `test -f ${shQuote(flag)}`,
    } as const;
    const first = wrap(call);
    expect(first.report).toMatchObject({ kind: 'ran', check_status: 0, exit: 0 });
    expect(wrap(call).report.kind).toBe('converged_before');
    const never = wrap({ mode: 'converge', command: 'true', check: 'false' });
    expect(never.report).toMatchObject({ kind: 'ran', check_status: 1, exit: 0 });
  });

  it('uses the XDG state directory when no marker dir is given', () => {
    const r = spawnSync('sh', ['-c', WRAPPER_EXEC], {
      env: { PATH: process.env.PATH, HOME: dir, XDG_STATE_HOME: join(dir, 'state') },
      input: wrapperRequest({
        mode: 'run',
        nonce: NONCE,
        markerDir: '',
        operationId: 'op_x',
        command: 'true',
      }),
    });
    expect(r.status).toBe(0);
    expect(existsSync(join(dir, 'state', 'candor', 'ops', 'op_x', 'done'))).toBe(true);
  });
});

describe('wrapper request (stdin)', () => {
  const base = { mode: 'run', command: '' } as const;
  const full = (call: Partial<WrapperCall>): WrapperCall => ({
    ...base,
    nonce: NONCE,
    markerDir: join(dir, 'ops'),
    operationId: 'op_req',
    ...call,
  });

  it('a request cut short is refused and runs nothing', () => {
    const ran = join(dir, 'ran');
    const request = wrapperRequest(full({ command: `touch ${shQuote(ran)}` }));
    const cut = request.subarray(0, request.indexOf(Buffer.from('# end')));
    const r = spawnSync('sh', ['-c', WRAPPER_EXEC], { input: cut });
    const parsed = parseWrapperOutput(r.stdout, NONCE);
    expect(parsed.value).toMatchObject({ kind: 'error', error: 'bad_request', exit: 70 });
    expect(existsSync(ran)).toBe(false);
  });

  it('secret inputs reach the command as environment variables only', () => {
    const secret = "s3cr3t 'quoted' $HOME `x`";
    const r = wrap({
      ...base,
      operationId: 'op_env',
      command: 'printf %s "$TOKEN"; printf %s "$TOKEN" | wc -c >&2',
      secretEnv: { TOKEN: secret },
    });
    expect(r.report.stdout.toString()).toBe(secret);
    expect(wrapperRequest(full({ secretEnv: { TOKEN: secret } })).toString()).toContain(
      shQuote(secret),
    );
    expect(() => wrapperRequest(full({ secretEnv: { 'BAD-NAME': 'x' } }))).toThrow(
      /bad_secret_env_name/,
    );
  });

  it('frames at most the cap and reports the total, in the run and in the marker', () => {
    const r = wrap({ ...base, operationId: 'op_cap', command: 'printf 0123456789', outputCap: 4 });
    expect(r.report.stdout.toString()).toBe('0123');
    expect(r.report.stdout_total).toBe(10);
    expect(readFileSync(join(dir, 'ops', 'op_cap', 'stdout'), 'utf8')).toBe('0123');
    const again = wrap({ ...base, operationId: 'op_cap', outputCap: 4 });
    expect(again.report).toMatchObject({ kind: 'existing', stdout_total: 10 });
    expect(again.report.stdout.toString()).toBe('0123');
  });
});

describe('parseWrapperOutput', () => {
  const line = (s: string) => `${WRAPPER_PROTOCOL} ${NONCE} ${s}\n`;
  it('skips banner noise before the first status line', () => {
    const out = Buffer.from(`motd\n${line('ran')}${line('stdout 2')}hi\n${line('exit 0')}`);
    const p = parseWrapperOutput(out, NONCE);
    expect(p.ok && p.value.stdout.toString()).toBe('hi');
  });
  it('rejects cut reports, wrong frames and other nonces', () => {
    expect(parseWrapperOutput(Buffer.from(line('ran')), NONCE)).toEqual({
      ok: false,
      failure: 'no_exit_line',
    });
    expect(
      parseWrapperOutput(Buffer.from(`${line('ran')}${line('stdout 5')}hi\n`), NONCE).failure,
    ).toBe('bad_frame');
    expect(parseWrapperOutput(Buffer.from(line('exit 0')), 'other').failure).toBe('no_report');
    expect(parseWrapperOutput(Buffer.from(line('exit 0')), NONCE).failure).toBe('bad_line');
    expect(parseWrapperOutput(Buffer.from(`${line('ran')}garbage\n`), NONCE).failure).toBe(
      'bad_line',
    );
  });
});

/** A process's start time, in clock ticks since boot (/proc/PID/stat field 22). */
function startTime(pid: number | string): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[19]!;
}

function readIfExists(p: string): string {
  try {
    return readFileSync(p, 'utf8');
  } catch {
    return '';
  }
}
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));
