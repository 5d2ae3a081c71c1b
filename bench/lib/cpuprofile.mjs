// Summarise a V8 .cpuprofile (from `node --cpu-prof`): self time per function and per file,
// so the hot spots of the hub's forwarding path can be read without a GUI.
import { readFileSync } from 'node:fs';

/**
 * `fromMs`/`toMs`: only samples in this window, in ms since the profile started (the process
 * start, near enough), so start-up does not drown the forwarding path.
 */
export function summarise(file, { top = 25, root = '', fromMs = 0, toMs = Infinity } = {}) {
  const prof = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const dt = prof.timeDeltas;
  let t = 0;
  for (let i = 0; i < prof.samples.length; i++) {
    t += dt[i] ?? 0;
    if (t < fromMs * 1000 || t > toMs * 1000) continue;
    const n = byId.get(prof.samples[i]);
    self.set(n, (self.get(n) ?? 0) + (dt[i] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const fnAgg = new Map();
  const fileAgg = new Map();
  for (const [n, us] of self) {
    const cf = n.callFrame;
    const url = cf.url.replace(/^file:\/\//, '').replace(root, '');
    const fn = `${cf.functionName || '(anonymous)'} ${url ? `${url}:${cf.lineNumber + 1}` : ''}`.trim();
    fnAgg.set(fn, (fnAgg.get(fn) ?? 0) + us);
    const where = url ? (url.startsWith('node:') ? url : url.replace(/^.*node_modules\/([^/]+(?:\/[^/]+)?)\/.*$/, 'npm:$1')) : `(${cf.functionName || 'native'})`;
    fileAgg.set(where, (fileAgg.get(where) ?? 0) + us);
  }
  // Inclusive time of the project's own functions: each sample counts once per function on its stack.
  const parent = new Map();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n);
  const incl = new Map();
  for (const [n, us] of self) {
    const seen = new Set();
    for (let p = n; p; p = parent.get(p.id)) {
      const cf = p.callFrame;
      if (!cf.url.includes('/dist/src/')) continue;
      const key = `${cf.functionName || '(anonymous)'} ${cf.url.replace(/^file:\/\//, '').replace(root, '')}:${cf.lineNumber + 1}`;
      if (seen.has(key)) continue;
      seen.add(key);
      incl.set(key, (incl.get(key) ?? 0) + us);
    }
  }
  const sorted = (m) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, v]) => ({ name: k, ms: v / 1000, pct: (100 * v) / total }));
  return { totalMs: total / 1000, functions: sorted(fnAgg), files: sorted(fileAgg), inclusive: sorted(incl) };
}

export function printSummary(s, out = process.stdout) {
  out.write(`CPU profile: ${s.totalMs.toFixed(0)} ms sampled\n`);
  // In front of the HTTP echo at 64 a profile showed the hub 53 % idle while schedstat put its
  // thread at 89–99 % of a core (docs/BENCHMARKS.md, nineteenth round).
  out.write('(idle) is not spare CPU: native work inside I/O callbacks is sampled as idle; for CPU per call, see bench/threads.mjs\n\nTop functions (self time):\n');
  for (const f of s.functions) out.write(`  ${f.pct.toFixed(1).padStart(5)}%  ${f.ms.toFixed(0).padStart(6)} ms  ${f.name}\n`);
  out.write('\nBy file / package (self time):\n');
  for (const f of s.files) out.write(`  ${f.pct.toFixed(1).padStart(5)}%  ${f.ms.toFixed(0).padStart(6)} ms  ${f.name}\n`);
  out.write('\nSwitchyard functions (inclusive time: the function and what it calls):\n');
  for (const f of s.inclusive) out.write(`  ${f.pct.toFixed(1).padStart(5)}%  ${f.ms.toFixed(0).padStart(6)} ms  ${f.name}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  printSummary(summarise(process.argv[2], { top: Number(process.argv[3] ?? 25), root: process.cwd() + '/' }));
}
