// Preloaded into the gateway by bench/soak.js (`node --expose-gc --import THIS bin/candor.js serve`):
// on SIGUSR2 it collects garbage and appends process.memoryUsage() as one JSON line to the file
// named by CANDOR_SOAK_MEMORY. Benchmark only; the gateway itself knows nothing of it.
import { appendFileSync } from 'node:fs';

const out = process.env.CANDOR_SOAK_MEMORY;
if (out) {
  process.on('SIGUSR2', () => {
    if (typeof globalThis.gc === 'function') globalThis.gc();
    appendFileSync(out, `${JSON.stringify(process.memoryUsage())}\n`);
  });
}
