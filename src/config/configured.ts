// The two shapes the configuration's checks and builders share (actions.ts for HTTP actions,
// ssh-actions.ts for SSH actions): a problem at a field of candor.yaml, and an action built from
// the configuration. Kept apart so that neither builder imports the other's module back.
import type { EngineAction } from '../engine/action.js';
import type { FieldPath } from './locate.js';

export interface ConfiguredAction {
  definition: EngineAction<unknown, unknown>;
  description: string;
  title: string | undefined;
  /** The tool arguments' JSON Schema as configured (without `operation_id`). */
  input_schema: Record<string, unknown>;
}

export interface Problem {
  path: FieldPath;
  problem: string;
  at?: 'key' | 'value';
}
