// Page 4: what `candor audit verify LEDGER` says (INTACT, or the code and the first bad seq), the
// checkpoints stored in the ledger and the witness cosignatures on them. No key is needed: the
// signatures are checked only when a log key is given to `audit verify`.
import { shellWord } from '../../core/shell.js';
import { unanchoredReason, type VerifyReport } from '../../ledger/chain/verify.js';
import { clip, html, iso, type Html } from '../html.js';
import type { CheckpointSummary } from '../live.js';

/** Shown until the first background verification of this view has finished. */
export function auditPending(seq: number): Html {
  return html`<div id="live-region" data-watch="*">
    <h1>Audit</h1>
    <div class="verdict warn" role="note" aria-label="Verification result" data-audit-pending>
      Verifying the ledger up to seq ${seq} in the background<span class="sub"
        >This page shows the result once it is done; reload in a moment.</span
      >
    </div>
  </div>`;
}

/** The newest checkpoint whose witness reported a possible fork or rollback, if any. */
const forkOf = (cps: readonly CheckpointSummary[]): CheckpointSummary | undefined =>
  [...cps].reverse().find((c) => c.witness_problem_code === 'fork');

export function auditBody(
  r: VerifyReport,
  checkpoints: readonly CheckpointSummary[],
  ledger: string,
  position: { verified_at_seq: number; current_seq: number } = {
    verified_at_seq: r.size,
    current_seq: r.size,
  },
  /** The command that runs Candor for the person reading (see web/hints.ts). */
  cli = 'candor',
): Html {
  // A green INTACT only where it is a proof: records that merely agree with each other, with nothing
  // anchoring them, are shown as UNANCHORED (amber) with the reason, never beside a pass.
  const unanchored = unanchoredReason(r);
  const fork = forkOf(checkpoints);
  return html`<div id="live-region" data-watch="*">
    <h1>Audit</h1>
    ${
      fork
        ? html`<div class="verdict bad" role="alert" data-witness-fork>
            Possible fork or rollback: the witness has cosigned a tree of size
            ${fork.witness_size ?? '?'} of this log; the checkpoint at seq ${fork.seq} has size
            ${fork.size}<span class="sub">${clip(fork.witness_problem ?? '', 300)}</span>
          </div>`
        : ''
    }
    <p class="muted" data-verified-at="${position.verified_at_seq}">
      Verified in the background up to seq
      ${position.verified_at_seq}${
        position.current_seq !== position.verified_at_seq
          ? ` (the ledger is at seq ${position.current_seq}; verifying again)`
          : ''
      }.
    </p>
    <div
      class="verdict ${!r.ok ? 'bad' : unanchored === null ? 'ok' : 'warn'}"
      role="note"
      aria-label="Verification result"
      data-audit-code="${r.code}"
      data-audit-anchored="${String(r.ok && unanchored === null)}"
    >
      ${
        unanchored === null
          ? html`${r.code}${
                r.first_bad_seq === null ? '' : ` — first bad record at seq ${r.first_bad_seq}`
              }<span class="sub">${clip(r.message, 300)}</span>`
          : html`UNANCHORED — the records agree with each other, nothing proves they were not
              rewritten<span class="sub"
                >The hash chain of ${r.size} record(s) is consistent, but ${unanchored}.</span
              >`
      }
    </div>
    <section class="card" aria-labelledby="v-h">
      <h2 id="v-h">Verification</h2>
      <dl class="facts">
        <dt>records verified</dt>
        <dd>${r.size}</dd>
        <dt>Merkle root</dt>
        <dd class="mono">${r.root || '–'}</dd>
        <dt>checkpoints compared</dt>
        <dd>${r.checkpoints}</dd>
        <dt>signatures</dt>
        <dd>
          ${r.signatures_checked ? 'checked' : 'not checked here (no log key given); run the command below with --log-key'}
        </dd>
        <dt>witnessed up to</dt>
        <dd>
          ${r.witnessed_size === 0 ? 'no witnessed checkpoint' : `record ${r.witnessed_size}`}
        </dd>
      </dl>
      <p>The same check on the command line:</p>
      <pre class="cmd">${cli} audit verify ${shellWord(ledger)}</pre>
      <p class="muted">
        Records after the newest witnessed checkpoint can vanish without a trace; a witness
        cosignature pins everything up to its size.
      </p>
    </section>
    <h2>Checkpoints (${checkpoints.length})</h2>
    ${
      checkpoints.length === 0
        ? html`<p class="muted">No checkpoint stored in this ledger.</p>`
        : html`<table aria-label="Checkpoints">
            <thead>
              <tr>
                <th scope="col">Seq</th>
                <th scope="col">When (UTC)</th>
                <th scope="col">Tree size</th>
                <th scope="col">Root hash</th>
                <th scope="col">Signed by</th>
                <th scope="col">Witness cosignatures</th>
              </tr>
            </thead>
            <tbody>
              ${[...checkpoints].reverse().map(
                (c) =>
                  html`<tr>
                    <td>${c.seq}</td>
                    <td>${iso(c.at)}</td>
                    <td>${c.size}</td>
                    <td class="mono">${c.root_hash.slice(0, 16)}…</td>
                    <td class="mono">${clip(c.signers[0] ?? '–')}</td>
                    <td>
                      ${
                        c.signers.length > 1
                          ? html`<span class="ok-text"
                              >${clip(c.signers.slice(1).join(', '), 200)}</span
                            >`
                          : c.witnessed === false
                            ? html`<span class="flag"
                                >${
                                  c.witness_problem_code === 'fork'
                                    ? `possible fork or rollback: witness at size ${c.witness_size ?? '?'}, checkpoint ${c.size}`
                                    : clip(c.witness_problem ?? 'witness did not cosign', 120)
                                }</span
                              >`
                            : 'none'
                      }
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
  </div>`;
}
