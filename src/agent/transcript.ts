// Transcripts: one JSONL line per tool call, with the arguments and the envelope that came back.
// Recorded from the scripted agent, from the MCP gateway, or imported from real agents.
import { z } from 'zod';
import { envelopeSchema } from '../core/envelope.js';

export const transcriptStepSchema = z.object({
  seq: z.number().int().nonnegative(),
  /** Milliseconds since the epoch when the call was made. */
  at: z.number(),
  tool: z.string().min(1),
  args: z.record(z.string(), z.unknown()).default({}),
  /** The envelope returned (absent when the call never returned, e.g. the agent crashed). */
  result: z
    .lazy(() => envelopeSchema)
    .nullable()
    .default(null),
});
export type TranscriptStep = z.output<typeof transcriptStepSchema>;

export interface TranscriptRecorder {
  record(step: Omit<TranscriptStep, 'seq'>): TranscriptStep;
  steps(): TranscriptStep[];
  toJsonl(): string;
}

export function createRecorder(redact: (s: string) => string = (s) => s): TranscriptRecorder {
  const steps: TranscriptStep[] = [];
  return {
    record(step) {
      const full = { ...step, seq: steps.length };
      steps.push(full);
      return full;
    },
    steps: () => [...steps],
    toJsonl: () =>
      steps.map((s) => redact(JSON.stringify(s))).join('\n') + (steps.length ? '\n' : ''),
  };
}

export type ParseResult =
  | { ok: true; value: TranscriptStep[]; failure?: never }
  | { ok: false; failure: { line: number; problem: string }; value?: never };

/** Parses JSONL; a bad line is reported by number and field, never skipped. */
export function parseTranscript(text: string): ParseResult {
  const steps: TranscriptStep[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      return { ok: false, failure: { line: i + 1, problem: 'not valid JSON' } };
    }
    const parsed = transcriptStepSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return {
        ok: false,
        failure: {
          line: i + 1,
          problem: `${issue?.path.join('.') || '(line)'}: ${issue?.message ?? 'invalid'}`,
        },
      };
    }
    steps.push(parsed.data);
  }
  return { ok: true, value: steps };
}
