// The ledger's ingest thread alone, in-process: what it does with a hand-over (split the
// chunk, JSON.parse each line, AuditApplier.take, flush: chain, INSERT, commit), on its own
// writer connection beside the hub's, with a PASSIVE checkpoint every --checkpoint-every
// batches (the thread's timer, 100 ms, at ~64 rows a batch and a few thousand rows a second).
// Lines are built as the hub writes them (RowValues.route/beginOpen/finish, finishedLine), a trace id each:
// --mix mixed has three servers, four principals and one call in ten an error; --mix bench the
// throughput bench's calls (one principal, server and tool). CPU a row (process.cpuUsage)
// after --warmup rows; with --callgrind the window is zeroed and dumped by callgrind_control,
// for a run under valgrind:
//
//   node bench/ledger-thread.mjs [--mix mixed|bench] [--rows 100000] [--batch 64] [--warmup 8000] [--checkpoint-every 20]
//   valgrind --tool=callgrind --callgrind-out-file=DIR/cg.out node --perf-basic-prof bench/ledger-thread.mjs --rows 4000 --warmup 4000 --callgrind
//   SWITCHYARD_BENCH_ROOT=/path/to/other/build node bench/ledger-thread.mjs ...   (A/B)
//
// The rows go to a fresh ledger in a temporary folder, removed afterwards; `switchyard ledger
// verify`'s check (verifyChain) runs on it at the end, and the run fails if it does not pass.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { numberOption, option } from './lib/args.mjs';
import { HUB_ROOT as ROOT } from './lib/targets.mjs';

const rows = numberOption('rows', 100_000);
const batch = numberOption('batch', 64);
const warmup = numberOption('warmup', 8000);
const checkpointEvery = numberOption('checkpoint-every', 20);
const underCallgrind = process.argv.includes('--callgrind');
// mixed: three servers, four principals, one call in ten an error; bench: the throughput bench's calls (one principal, server and tool, no errors).
const mix = option('mix', 'mixed');
if (mix !== 'mixed' && mix !== 'bench') throw new Error('--mix is mixed or bench');

const lib = (f) => import(join(ROOT, 'dist/src/ledger', f));
const { openLedgerDb, openLedgerWriter } = await lib('db.js');
const { AuditApplier, parseLine = JSON.parse } = await lib('audit-apply.js');
const { RowValues, finishedLine } = await lib('row-values.js');
const { verifyChain } = await lib('chain.js');

const dir = mkdtempSync(join(tmpdir(), 'switchyard-ledger-thread-'));
const path = join(dir, 'ledger.db');
const hubDb = openLedgerDb({ path, migrationsDir: join(ROOT, 'migrations') });
const db = openLedgerWriter(path);
const quiet = { error: () => {}, warn: () => {}, info: () => {}, debug: () => {} };
const applier = new AuditApplier(db, quiet);
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)').raw();
const values = new RowValues({});

const servers = mix === 'bench' ? ['echo'] : ['echo', 'files', 'search'];
const principals = mix === 'bench' ? ['anonymous'] : ['alice', 'bob', 'ci-bot', 'anonymous'];
const tools = mix === 'bench' ? 1 : 5;
const errorEvery = mix === 'bench' ? Infinity : 10;
let id = 0;
let ts = Date.now();
const hex = (n) => Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');

function line() {
  id++;
  ts += Math.random() < 0.5 ? 1 : 0;
  const server = servers[id % servers.length];
  const b = {
    ts,
    requestId: String(id),
    principal: principals[id % principals.length],
    clientAddress: '127.0.0.1',
    clientEra: '2026-07-28',
    clientInfo: { name: 'bench-client', version: '1.0.0' },
    method: 'tools/call',
    hubName: `${server}__tool${id % tools}`,
    server,
    upstreamName: `tool${id % tools}`,
    upstreamEra: '2025-11-25',
    argsHash: hex(64),
    requestBytes: 180 + (id % 40),
    traceId: hex(32),
    spanId: hex(16),
  };
  const route = values.route(b);
  const error = id % errorEvery === 0;
  const fin = values.finish(route, {
    outcome: error ? 'error' : 'ok',
    errorKind: error ? 'upstream' : undefined,
    errorCode: error ? -32603 : undefined,
    errorMessage: error ? 'upstream failed' : undefined,
    latencyMs: 0.3 + (id % 17) / 10,
    responseBytes: 90 + (id % 30),
  });
  return finishedLine(values.beginOpen(id, b, route), fin);
}

/** Batches of `batch` lines, joined as one chunk (the hub joins lines by newlines). */
function batches(n) {
  const out = [];
  for (let done = 0; done < n; done += batch) {
    const lines = [];
    for (let i = 0; i < Math.min(batch, n - done); i++) lines.push(line());
    out.push([lines.join('\n')]);
  }
  return out;
}

/** As ingest-worker.ts's takeLines (a build before it ignores the lines, or has no parseLine and uses JSON.parse). */
function takeLines(chunks) {
  const records = [];
  const lines = [];
  for (const chunk of chunks) {
    for (const l of chunk.split('\n')) {
      if (l === '') continue;
      records.push(parseLine(l));
      lines.push(l);
    }
  }
  applier.take(records, lines);
}

let count = 0;
function run(list) {
  for (const chunks of list) {
    takeLines(chunks);
    if (!applier.flush(false)) throw new Error('a batch was refused');
    if (++count % checkpointEvery === 0) checkpoint.get();
  }
}

const warm = batches(warmup);
const measured = batches(rows);
run(warm);
if (underCallgrind) execFileSync('callgrind_control', ['-z', String(process.pid)], { stdio: 'ignore' });
const cpu0 = process.cpuUsage();
const t0 = performance.now();
run(measured);
const cpu = process.cpuUsage(cpu0);
const ms = performance.now() - t0;
if (underCallgrind) execFileSync('callgrind_control', ['-d', 'window', String(process.pid)], { stdio: 'ignore' });
const v = verifyChain(hubDb);
db.close();
hubDb.close();
rmSync(dir, { recursive: true, force: true });
if (!v.ok) throw new Error(`verify failed: ${JSON.stringify(v)}`);
console.log(
  JSON.stringify({
    root: ROOT,
    mix,
    rows,
    batch,
    cpuUsPerRow: +((cpu.user + cpu.system) / rows).toFixed(2),
    userUsPerRow: +(cpu.user / rows).toFixed(2),
    sysUsPerRow: +(cpu.system / rows).toFixed(2),
    rowsPerSec: Math.round(rows / (ms / 1000)),
    verified: v.rows,
    lineDigests: applier.lineDigests,
  }),
);
