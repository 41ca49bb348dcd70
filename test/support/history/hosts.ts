// Where a history's gateway runs. A lone gateway (SQLite): one process per agent session, as a
// stdio `candor serve` is, serving that agent's operations one after another; a restart stops it
// (cleanly or as a crash) and starts a new process on the same ledger file, with a new ledger
// handle and the same owner identity, as `candor serve` composes one from its configuration
// (config/compose.ts `stableOwner`: a gateway outside a fleet is the same owner across restarts).
// Several agent sessions share the ledger file, each as its own configured gateway.
import { openLedger } from '../../../src/ledger/open.js';
import type { LedgerStore } from '../../../src/ledger/store.js';
import type { Host } from './agent.js';
import { startGateway, type FaultedWorld, type GatewayProcess } from './world.js';

let hosts = 0;

export class SoloHost implements Host {
  private gw: Promise<GatewayProcess> | null = null;
  private readonly owner = `gateway:history:${++hosts}`;

  constructor(
    private readonly world: FaultedWorld,
    private readonly url: string,
    readonly reader: LedgerStore,
  ) {}

  current(): Promise<GatewayProcess> {
    return (this.gw ??= this.open());
  }

  private async open(): Promise<GatewayProcess> {
    const opened = await openLedger(this.url);
    if (!opened.ok) throw new Error(`cannot open ${this.url}: ${opened.failure.message}`);
    return startGateway(this.world, { ledger: opened.value, ownsLedger: true, owner: this.owner });
  }

  async restart(clean: boolean): Promise<void> {
    const old = await this.current();
    await old.stop(clean);
    this.gw = this.open();
    await this.gw;
  }

  async close(): Promise<void> {
    if (this.gw) await (await this.gw).stop(true);
    this.gw = null;
  }
}
