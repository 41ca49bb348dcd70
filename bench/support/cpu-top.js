// Prints the hottest functions of a V8 CPU profile (`node --cpu-prof`): self time (the function's
// own code) and total time (with everything it called), each as a share of the sampled time.
//   node bench/support/cpu-top.js PROFILE.cpuprofile [--top N]
import { readFileSync } from 'node:fs';

const [file, ...rest] = process.argv.slice(2);
if (!file) {
  console.error('usage: node bench/support/cpu-top.js PROFILE.cpuprofile [--top N]');
  process.exit(2);
}
const top = Number(rest[rest.indexOf('--top') + 1] ?? 25) || 25;
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
// Sample counts per node; each sample stands for the time until the next one.
const hits = new Map();
for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
const total = profile.samples.length || 1;
const label = (n) => {
  const f = n.callFrame;
  const where = f.url
    ? `${f.url
        .replace(/^file:\/\//, '')
        .split('/')
        .slice(-2)
        .join('/')}:${f.lineNumber + 1}`
    : '';
  return `${f.functionName || '(anonymous)'} ${where}`.trim();
};
const self = new Map();
const inclusive = new Map();
for (const [id, count] of hits) {
  const node = byId.get(id);
  const key = label(node);
  self.set(key, (self.get(key) ?? 0) + count);
  // Count each function once per stack, however deep its recursion.
  const seen = new Set();
  for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
    const k = label(byId.get(cur));
    if (seen.has(k)) continue;
    seen.add(k);
    inclusive.set(k, (inclusive.get(k) ?? 0) + count);
  }
}
const pct = (n) => `${((100 * n) / total).toFixed(1).padStart(5)}%`;
const ms = ((profile.endTime - profile.startTime) / 1000).toFixed(0);
console.log(`${file}: ${total} samples over ${ms} ms`);
console.log('\nself (own code; (program)/(garbage collector)/(idle) are V8 and the event loop):');
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${pct(v)}  ${k}`);
console.log('\ntotal (including callees):');
for (const [k, v] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${pct(v)}  ${k}`);
