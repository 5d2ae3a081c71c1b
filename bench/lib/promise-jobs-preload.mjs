// Loaded into the hub by bench/promise-jobs.mjs (--import): counts the promises made and the
// promise jobs run (each `before` of a PROMISE resource: a reaction, an await resumed), by the
// hub's frames of the stack that made the promise. The first SIGUSR2 starts counting, each one
// after writes the counts to $PROMISE_JOBS_OUT.N.json and starts again.
import { createHook } from 'node:async_hooks';
import { writeFileSync } from 'node:fs';

const sites = new Map();
const made = new Map();
const jobs = new Map();
let on = false;
let dumps = 0;

/** The hub's three innermost frames (dist/src), or the innermost frame when none is the hub's. */
function site() {
  const e = {};
  Error.captureStackTrace(e, site);
  const frames = e.stack.split('\n').slice(1).map((l) => l.trim()).filter((l) => !l.includes('node:internal/async_hooks') && !l.includes('promise-jobs-preload'));
  const ours = frames.filter((l) => l.includes('/dist/src/')).slice(0, 3).map((l) => l.replace(/^at /, '').replace(/\(?file:\/\/[^)]*\/dist\/src\//, '').replace(/\)$/, ''));
  return ours.join(' <- ') || frames[0] || '?';
}

const bump = (m, k) => m.set(k, (m.get(k) ?? 0) + 1);
createHook({
  init(id, type) {
    if (!on || type !== 'PROMISE') return;
    const s = site();
    sites.set(id, s);
    bump(made, s);
  },
  before(id) {
    const s = on ? sites.get(id) : undefined;
    if (s !== undefined) bump(jobs, s);
  },
}).enable();

process.on('SIGUSR2', () => {
  if (on) {
    const sorted = (m) => [...m].sort((a, b) => b[1] - a[1]);
    writeFileSync(`${process.env.PROMISE_JOBS_OUT}.${dumps++}.json`, JSON.stringify({ made: sorted(made), jobs: sorted(jobs) }, null, 1));
  }
  sites.clear();
  made.clear();
  jobs.clear();
  on = true;
});
