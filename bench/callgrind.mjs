// Instructions per call of each of the hub's threads, counted by valgrind's callgrind: a figure
// the machine's load does not move (docs/BENCHMARKS.md, sixty-first session), where wall-clock
// and CPU-time figures need a quiet machine. The hub (the built one, as `npm start` runs it)
// runs under callgrind with the stdio echo upstream, or with `--upstream http` the modern HTTP
// echo (bench/echo-http.mjs, itself not under callgrind); `--target limit` runs the bench's
// forwarding limit (bench/forwarder.mjs, as the main bench's limit-stdio / limit-http) under
// callgrind instead of the hub (without the hub's Node flags, as the main bench runs it; the
// echo not under callgrind either), so the hub's event loop can be set against the forwarder's
// per call, a ratio the machine's load does not move either. `--warmup` modern `tools/call`s, then
// the counters are zeroed (callgrind_control -z), `--calls` more are sent, and the counters
// dumped (-d): only that window counts, start-up and shutdown left out. Node runs ~50× slower
// under callgrind: a run of the defaults takes minutes; JIT code is counted like any other.
// What runs by the clock rather than per call (young GCs, the ledger's hand-over timers, the
// ingest thread's checkpoints and WAL resets) lands more or less often with valgrind's pace, which
// the machine's load sets: compare runs made side by side, or function by function, or the
// threads less the garbage collector's and SQLite's step (docs/BENCHMARKS.md, sixty-second session).
//
//   node bench/callgrind.mjs [--target hub|limit] [--upstream stdio|http] [--ledger on|off] [--concurrency 1] [--warmup 4000] [--calls 400] [--js-names] [--out DIR] [--stall-ms 300000]
//   SWITCHYARD_BENCH_ROOT=/path/to/other/build node bench/callgrind.mjs ...   (A/B)
//
// Then, per thread (…-01 is the event loop), e.g.
//   callgrind_annotate --threshold=100 DIR/cg.out.1-01[.js]
//   callgrind_annotate --threshold=100 --inclusive=yes --tree=calling DIR/cg.out.1-01.js   (who costs what, callees)
// --js-names: node runs with --perf-basic-prof --interpreted-frames-native-stack (a little more
// work per call; compare like with like) and the dump's JIT addresses are renamed by the perf
// map (files ….js), so JavaScript functions appear by name. Needs valgrind.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import net from 'node:net';
import { numberOption, option } from './lib/args.mjs';
import { modernRequest } from './lib/mcp.mjs';
import { echoStdioCommand, HUB_ROOT, startEchoHttp, startForwarder, startHub } from './lib/targets.mjs';

const target = option('target', 'hub');
if (target !== 'hub' && target !== 'limit') throw new Error('--target is hub or limit');
const upstream = option('upstream', 'stdio');
if (upstream !== 'stdio' && upstream !== 'http') throw new Error('--upstream is stdio or http');
const ledger = option('ledger', 'on') === 'on';
const concurrency = numberOption('concurrency', 1);
const warmup = numberOption('warmup', 4000);
const calls = numberOption('calls', 400);
const jsNames = process.argv.includes('--js-names');
// No answer at all for this long: the run stops with what was outstanding, rather than wait for ever.
const stallMs = numberOption('stall-ms', 300_000);
const out = option('out', undefined);
const dir = out ? resolve(out) : mkdtempSync(join(tmpdir(), 'switchyard-callgrind-'));
mkdirSync(dir, { recursive: true });
const file = join(dir, 'cg.out');

const echoHttp = upstream === 'http' ? await startEchoHttp() : undefined;
const echo = echoHttp ?? echoStdioCommand();
const under = {
  wrapper: ['valgrind', '--tool=callgrind', '--separate-threads=yes', `--callgrind-out-file=${file}`],
  nodeArgs: jsNames ? ['--perf-basic-prof', '--interpreted-frames-native-stack'] : [],
  readyTimeoutMs: 900_000,
};
const hub =
  target === 'limit'
    ? // In DIR: --perf-basic-prof has V8 write its isolate log to the working folder.
      await startForwarder(echo, { ...under, cwd: dir })
    : await startHub({
        servers: { echo: echoHttp ? { url: echoHttp.url } : echo },
        ledger,
        // A call held up past quietCallStreamMs (5 s: valgrind's pace on a loaded machine) is
        // answered as an SSE stream, which send() does not read; still watched (the same work per
        // call), just never due.
        // A build from before the option (an A/B against an old commit) refuses the key; it never
        // streamed a quiet call either.
        extraConfig: { listen: { host: '127.0.0.1', port: 0, ...(knowsQuietCallStream() ? { quietCallStreamMs: 600_000 } : {}) } },
        ...under,
      });
const request = modernRequest({ port: hub.port, method: 'tools/call', tool: target === 'limit' ? 'echo' : 'echo__echo' });
const control = (...args) => execFileSync('callgrind_control', [...args, String(hub.pid)], { stdio: 'ignore' });
const conns = Array.from({ length: concurrency }, () => connect());
try {
  await send(warmup);
  control('-z');
  await send(calls);
  control('-d', 'window');
} finally {
  for (const c of conns) c.close();
  await hub.stop();
  await echoHttp?.stop();
}
report();
if (jsNames) nameJit();
console.log(`callgrind files: ${dir} (the window: cg.out.1-NN, one per thread; -01 the event loop)`);

/**
 * `n` calls, `concurrency` at a time, each on its own keep-alive connection, the same ones for the
 * warm-up and the window: new sockets after the warm-up had V8 deoptimise Node's stream code and
 * the hub's edge once, inside the window (55-90k instructions a call more; docs/BENCHMARKS.md,
 * the sixty-first entry). Every answer must be the echo's.
 */
async function send(n) {
  let left = n;
  let seq = 0;
  let answered = 0;
  let lastAnswer = performance.now();
  let watchdog;
  const stalled = new Promise((_, reject) => {
    watchdog = setInterval(() => {
      if (performance.now() - lastAnswer < stallMs) return;
      reject(new Error(`no answer for ${stallMs} ms: ${answered} of ${n} answered, ${n - left - answered} in flight (--stall-ms)`));
    }, Math.min(stallMs, 10_000));
  });
  try {
    await Promise.race([
      stalled,
      Promise.all(
        Array.from({ length: concurrency }, async (_, w) => {
          const conn = conns[w];
          const bytes = Buffer.from(request.buf);
          while (left > 0) {
            left--;
            bytes.write(`w${String(w).padStart(4, '0')}n${String(++seq).padStart(10, '0')}`, request.idOffset, 'latin1');
            const body = await conn.send(bytes);
            answered++;
            lastAnswer = performance.now();
            if (!body.includes('"result"') || !body.includes('hello')) throw new Error(`not the echo's answer: ${body.slice(0, 300)}`);
          }
        }),
      ),
    ]);
  } finally {
    clearInterval(watchdog);
  }
}

function connect() {
  const socket = net.connect(hub.port, '127.0.0.1');
  socket.setNoDelay(true);
  let buf = Buffer.alloc(0);
  let waiting;
  socket.on('error', (err) => waiting?.reject(err));
  // A connection the hub ends (its keep-alive or request timeout, valgrind's pace on a loaded
  // machine) would otherwise leave its worker waiting for ever, with the hub idle: say so.
  socket.on('close', () => waiting?.reject(new Error(`the hub closed connection ${conns.indexOf(self)} with a call unanswered`)));
  socket.on('data', (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    const headEnd = buf.indexOf('\r\n\r\n');
    if (headEnd < 0) return;
    const head = buf.toString('latin1', 0, headEnd);
    const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    if (!length) return waiting?.reject(new Error(`an answer without content-length: ${head}`));
    const end = headEnd + 4 + Number(length[1]);
    if (buf.length < end) return;
    const body = buf.toString('utf8', headEnd + 4, end);
    buf = buf.subarray(end);
    const w = waiting;
    waiting = undefined;
    w?.resolve(`${head.slice(9, 12)} ${body}`);
  });
  const self = {
    send: (bytes) =>
      new Promise((resolve, reject) => {
        // Written to a socket already closed, the bytes go nowhere and no event follows.
        if (socket.destroyed) return reject(new Error(`connection ${conns.indexOf(self)} was closed by the hub between calls`));
        waiting = { resolve, reject };
        socket.write(bytes);
      }),
    close: () => {
      waiting = undefined;
      socket.destroy();
    },
  };
  return self;
}

/** Whether the measured build knows `listen.quietCallStreamMs` (builds before it refuse an unknown key). */
function knowsQuietCallStream() {
  const src = join(HUB_ROOT, 'dist', 'src');
  return readdirSync(src, { recursive: true }).some((f) => /\.c?js$/.test(f) && readFileSync(join(src, f), 'utf8').includes('quietCallStreamMs'));
}

function windowFiles() {
  return readdirSync(dir).filter((f) => /^cg\.out\.1-\d+$/.test(f)).sort();
}

/** Per call: the event loop (thread 1), the ledger's ingest thread (a worker running SQLite), V8's compiler threads, the rest. */
function report() {
  const sums = { loop: 0, ingest: 0, compiler: 0, rest: 0 };
  for (const f of windowFiles()) {
    const text = readFileSync(join(dir, f), 'utf8');
    const ir = Number(/^summary: (\d+)/m.exec(text)?.[1] ?? 0);
    if (f.endsWith('-01')) sums.loop += ir;
    else if (/^fn=\(\d+\) sqlite3/m.test(text) && /node::worker::Worker::Run/.test(text)) sums.ingest += ir;
    else if (/^fn=\(\d+\) v8::internal::compiler::/m.test(text)) sums.compiler += ir;
    else sums.rest += ir;
  }
  const k = (ir) => `${(ir / calls / 1000).toFixed(1)}k`;
  console.log(
    `${target === 'limit' ? 'the forwarding limit' : `the hub, ledger ${ledger ? 'on' : 'off'}`}, ${upstream} echo @${concurrency}, ${calls} calls after ${warmup}: instructions per call: event loop ${k(sums.loop)}, ` +
      `ingest thread ${k(sums.ingest)}, V8 compiler threads ${k(sums.compiler)}, the rest ${k(sums.rest)}`,
  );
}

/** Rename the window's JIT functions (callgrind names them by address) by V8's perf map, into ….js files. */
function nameJit() {
  const pid = /^pid: (\d+)/m.exec(readFileSync(join(dir, windowFiles()[0]), 'utf8'))?.[1];
  const mapFile = `/tmp/perf-${pid}.map`;
  if (!existsSync(mapFile)) return console.log(`no ${mapFile}: JIT code left unnamed`);
  const ranges = readFileSync(mapFile, 'utf8')
    .trim()
    .split('\n')
    .map((line) => /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line))
    .filter(Boolean)
    .map((m) => ({ start: parseInt(m[1], 16), end: parseInt(m[1], 16) + parseInt(m[2], 16), name: m[3].replace(/\s+/g, '_') }));
  // The latest entry holding an address wins: code freed and its space reused is mapped again later.
  const nameOf = (addr) => {
    for (let i = ranges.length - 1; i >= 0; i--) if (ranges[i].start <= addr && addr < ranges[i].end) return ranges[i].name;
    return undefined;
  };
  for (const f of windowFiles()) {
    const text = readFileSync(join(dir, f), 'utf8').replace(/^(c?fn=\(\d+\)) 0x([0-9a-f]+)$/gm, (all, head, hex) => {
      const name = nameOf(parseInt(hex, 16));
      return name ? `${head} ${name}` : all;
    });
    writeFileSync(join(dir, `${f}.js`), text);
  }
  rmSync(mapFile, { force: true });
}
