// The commands the pages print, as the person who started `candor ui` would type them: the
// command they have (`candor`, or `node …/bin/candor.js` when it is not installed, decided by the
// CLI) and the same ledger selection (`--config FILE` and/or `--ledger URL`) the view was started
// with. A printed command must work when pasted in that terminal.
import { shellWord } from '../core/shell.js';

export interface CommandHints {
  /** The command that runs Candor here, e.g. `candor` or `node bin/candor.js`. */
  cli: string;
  /** The configuration the view was started with (as given), or null. */
  config: string | null;
  /** The ledger URL given with --ledger (shown form, no password), or null. */
  ledger: string | null;
}

export interface Hints extends CommandHints {
  /** `--config FILE` and/or `--ledger URL`: where the view's ledger comes from. */
  select: string;
  /** How recovery runs for this ledger, or null when no configuration is known. */
  recover: string | null;
}

/** Hints for a view of `shownLedger`; without `given`, the bare `candor` and `--ledger URL`. */
export function hintsFor(shownLedger: string, given?: CommandHints): Hints {
  const h: CommandHints = given ?? { cli: 'candor', config: null, ledger: shownLedger };
  const parts = [
    ...(h.config !== null ? [`--config ${shellWord(h.config)}`] : []),
    ...(h.ledger !== null ? [`--ledger ${shellWord(h.ledger)}`] : []),
  ];
  const select = parts.length > 0 ? parts.join(' ') : `--ledger ${shellWord(shownLedger)}`;
  return {
    ...h,
    select,
    recover: h.config !== null ? `${h.cli} recover ${select}` : null,
  };
}
