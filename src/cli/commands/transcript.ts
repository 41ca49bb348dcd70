// candor transcript check FILE [--rules F] [--json]
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { checkTranscript, rulesSchema, DEFAULT_RULES, type Rules } from '../../agent/rules.js';
import { parseTranscript } from '../../agent/transcript.js';
import { parseFlags, CliUsageError, type CommandIo } from '../io.js';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, { rules: 'string', json: 'boolean' });
  if (positional[0] !== 'check' || positional.length !== 2) {
    throw new CliUsageError('usage: candor transcript check FILE [--rules F] [--json]');
  }
  const file = positional[1]!;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    io.err(
      `candor transcript: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? 'error'}\n`,
    );
    return 3;
  }
  let rules: Rules = DEFAULT_RULES;
  if (typeof flags.rules === 'string') {
    let raw: unknown;
    try {
      raw = parseYaml(await readFile(flags.rules, 'utf8'));
    } catch (e) {
      io.err(
        `candor transcript: cannot read rules ${flags.rules}: ${(e as Error).message.split('\n')[0]}\n`,
      );
      return 3;
    }
    const parsed = rulesSchema.safeParse(raw ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new CliUsageError(
        `${flags.rules}: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
      );
    }
    rules = parsed.data;
  }
  const parsed = parseTranscript(text);
  if (!parsed.ok) {
    throw new CliUsageError(`${file}:${parsed.failure.line}: ${parsed.failure.problem}`);
  }
  const violations = checkTranscript(parsed.value, rules);
  if (flags.json) {
    io.out(`${JSON.stringify({ file, steps: parsed.value.length, violations }, null, 2)}\n`);
  } else if (violations.length === 0) {
    io.out(`${file}: ${parsed.value.length} steps, every transition allowed\n`);
  } else {
    for (const v of violations) {
      io.out(
        `${file}: step ${v.step} (${v.tool}) breaks ${v.rule}: ${v.explanation} (see step ${v.because_of})\n`,
      );
    }
    io.out(`${violations.length} violation(s) in ${parsed.value.length} steps\n`);
  }
  return violations.length === 0 ? 0 : 1;
}
