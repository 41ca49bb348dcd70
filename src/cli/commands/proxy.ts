// candor proxy --upstream URL [--port N] [--admin-port N] [--faults FILE] [--log FILE]
// A fault-injecting HTTP/1.1 proxy in front of a real service, on loopback. Prints the proxy's URL
// and the admin API's URL, arms the fault file's faults, and runs until SIGINT or SIGTERM. A fault
// file with a problem, or an upstream that cannot be reached, stops it before it listens.
import { loadFaultFile, startProxyAdmin } from '../../fakes/proxy-admin.js';
import { startProxy, UpstreamError, type ProxyService } from '../../fakes/proxy.js';
import type { Fault } from '../../fakes/faults.js';
import { Exit, parseFlags, untilStopped, CliUsageError, type CommandIo } from '../io.js';

const USAGE =
  'usage: candor proxy --upstream URL [--port N] [--admin-port N] [--faults FILE] [--log FILE]';

export interface RunOptions {
  /** Stops the proxy like a signal does (tests). */
  signal?: AbortSignal;
}

function portOf(name: string, v: string | boolean | undefined): number | undefined {
  if (typeof v !== 'string') return undefined;
  if (!/^\d{1,5}$/.test(v) || Number(v) > 65535)
    throw new CliUsageError(`--${name} must be 0..65535, not "${v}"`);
  return Number(v);
}

export async function run(args: string[], io: CommandIo, opts: RunOptions = {}): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    upstream: 'string',
    port: 'string',
    'admin-port': 'string',
    faults: 'string',
    log: 'string',
  });
  const upstream = flags.upstream;
  if (typeof upstream !== 'string' || positional.length > 0) throw new CliUsageError(USAGE);
  if (!/^https?:\/\/[^/?#@\s]+(\/[^?#\s]*)?$/.test(upstream))
    throw new CliUsageError(`--upstream must be http(s)://host[:port][/prefix], not "${upstream}"`);
  const port = portOf('port', flags.port);
  const adminPort = portOf('admin-port', flags['admin-port']);
  let faults: Fault[] = [];
  if (typeof flags.faults === 'string') {
    const loaded = await loadFaultFile(flags.faults);
    if (!loaded.ok) {
      io.err(`candor proxy: ${loaded.failure.message}\n`);
      return loaded.failure.kind === 'unreadable' ? Exit.environment : Exit.usage;
    }
    faults = loaded.value;
  }
  let proxy: ProxyService;
  try {
    proxy = await startProxy({
      upstream,
      ...(port !== undefined ? { port } : {}),
      ...(typeof flags.log === 'string' ? { logFile: flags.log } : {}),
    });
  } catch (e) {
    if (e instanceof UpstreamError) {
      io.err(`candor proxy: ${e.message}\n`);
      return e.code === 'invalid_url' ? Exit.usage : Exit.environment;
    }
    const code = (e as NodeJS.ErrnoException).code ?? String(e);
    io.err(`candor proxy: cannot listen on 127.0.0.1:${port ?? 0} (${code})\n`);
    return Exit.environment;
  }
  let admin;
  try {
    admin = await startProxyAdmin(proxy, adminPort !== undefined ? { port: adminPort } : {});
  } catch (e) {
    await proxy.close();
    const code = (e as NodeJS.ErrnoException).code ?? String(e);
    io.err(
      `candor proxy: cannot listen on 127.0.0.1:${adminPort ?? 0} for the admin API (${code})\n`,
    );
    return Exit.environment;
  }
  for (const f of faults) proxy.arm(f);
  io.out(`${proxy.url}\nadmin ${admin.url}\n`);
  await untilStopped(opts.signal);
  await admin.close();
  await proxy.close();
  return Exit.ok;
}
