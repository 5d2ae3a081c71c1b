/** Line framing of child stdout, and the child process wrapper against real processes. */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Socket } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import fc from 'fast-check';
import { pino } from 'pino';
import { silentLogger } from '../../src/log.js';
import { packageRoot } from '../../src/paths.js';
import { hubShortOf, LineDecoder, spawnFailure, StdioChild, stderrReason } from '../../src/transport/stdio-child.js';

/** A legacy stdio server answering initialize, for an upstream to start against. */
const LEGACY_ECHO = `require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const m = JSON.parse(l);
  if (m.id !== undefined) process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: {}, serverInfo: { name: 'e', version: '1' } } }) + '\\n');
});`;

function decode(chunks: (string | Buffer)[], max = 1024): { lines: string[]; dropped: number[] } {
  const lines: string[] = [];
  const dropped: number[] = [];
  const d = new LineDecoder(max, (l) => lines.push(l), (n) => dropped.push(n));
  for (const c of chunks) d.push(typeof c === 'string' ? Buffer.from(c) : c);
  return { lines, dropped };
}

describe('LineDecoder', () => {
  it('joins partial chunks, strips \\r before \\n, skips empty lines, keeps a trailing partial', () => {
    expect(decode(['{"a":', '1}\r\n\n{"b"', ':2}\n{"c"'])).toEqual({ lines: ['{"a":1}', '{"b":2}'], dropped: [] });
  });

  it('never splits a multi-byte character, whatever the chunking', () => {
    const text = 'é€😀 ok\nzweite Zeile ü\n';
    const bytes = Buffer.from(text);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 6 }), (cuts) => {
        const at = [...new Set(cuts)].sort((a, b) => a - b);
        const parts: Buffer[] = [];
        let prev = 0;
        for (const c of at) {
          parts.push(bytes.subarray(prev, c));
          prev = c;
        }
        parts.push(bytes.subarray(prev));
        expect(decode(parts).lines).toEqual(['é€😀 ok', 'zweite Zeile ü']);
      }),
    );
  });

  it('drops a line over the bound, in one chunk or many, and resumes at the next line', () => {
    const big = 'x'.repeat(50);
    expect(decode([`${big}\nok\n`], 20)).toEqual({ lines: ['ok'], dropped: [50] });
    expect(decode(['x'.repeat(15), 'x'.repeat(15), 'x'.repeat(15), '\nok\n'], 20)).toEqual({ lines: ['ok'], dropped: [45] });
    expect(decode(['x'.repeat(15), 'x'.repeat(10) + '\nok\n'], 20)).toEqual({ lines: ['ok'], dropped: [25] });
    expect(decode(['x'.repeat(20) + '\n'], 20)).toEqual({ lines: ['x'.repeat(20)], dropped: [] });
  });

  it('at the end of input, takes a last line without its newline, or reports it as too long', () => {
    const lines: string[] = [];
    const dropped: number[] = [];
    const d = new LineDecoder(20, (l) => lines.push(l), (n) => dropped.push(n));
    d.push(Buffer.from('{"a":1}\n{"b"'));
    d.push(Buffer.from(':2}'));
    d.end();
    expect(lines).toEqual(['{"a":1}', '{"b":2}']);
    d.push(Buffer.from('x'.repeat(15)));
    d.push(Buffer.from('x'.repeat(15)));
    d.end();
    d.end();
    expect({ lines, dropped }).toEqual({ lines: ['{"a":1}', '{"b":2}'], dropped: [30] });
  });

  it('does not keep a reference to a caller buffer that may be reused', () => {
    const lines: string[] = [];
    const d = new LineDecoder(100, (l) => lines.push(l), () => undefined);
    const buf = Buffer.from('abc');
    d.push(buf);
    buf.write('zzz');
    d.push(Buffer.from('def\n'));
    expect(lines).toEqual(['abcdef']);
  });
});

describe('StdioChild', () => {
  const script = (src: string): string[] => ['-e', src];

  it('out of file descriptors, reports EMFILE as the reason it could not start (not a TypeError of the missing pipes)', () => {
    // A process of its own under a low limit (prlimit), its descriptors used up but two.
    const dist = (p: string) => JSON.stringify(pathToFileURL(join(packageRoot, 'dist/src', p)).href);
    const src = `import { openSync, closeSync } from 'node:fs';
const { StdioChild } = await import(${dist('transport/stdio-child.js')});
const { silentLogger } = await import(${dist('log.js')});
const fds = [];
try { for (;;) fds.push(openSync('/dev/null', 'r')); } catch {}
closeSync(fds.pop()); closeSync(fds.pop());
let exit;
try {
  exit = await new StdioChild({ command: process.execPath, args: ['-e', '0'], maxFrameBytes: 1024, log: silentLogger }).exit;
} catch (err) { exit = { thrown: String(err) }; }
for (const fd of fds) closeSync(fd);
process.stdout.write(JSON.stringify(exit));`;
    const r = spawnSync('prlimit', ['--nofile=64:64', process.execPath, '--input-type=module', '-e', src], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ code: null, signal: null, hubShort: true, error: expect.stringMatching(/EMFILE: the hub has no file descriptors left for its pipes \(too many open files: see listen\.maxConnections/) });
  });

  it("a stdio server the hub cannot spawn for its own want of descriptors is no crash loop: never failed, ready again about a second after they are back", () => {
    // Backoff from 10 ms: counted as crashes, five attempts in the 400 ms without descriptors
    // made it `failed`, retried only after failedRetryMs (60 s), long after they were back.
    const dist = (p: string) => JSON.stringify(pathToFileURL(join(packageRoot, 'dist/src', p)).href);
    const src = `import { openSync, closeSync } from 'node:fs';
const { createUpstream } = await import(${dist('upstream/index.js')});
const { silentLogger } = await import(${dist('log.js')});
const u = createUpstream({ id: 's', command: process.execPath, args: ['-e', ${JSON.stringify(LEGACY_ECHO)}], era: '2025-11-25', timeoutMs: 5000, probeTimeoutMs: 2000, maxFrameBytes: 1024 }, silentLogger, { backoff: { baseMs: 10 } });
const states = [];
u.on('state', (s, d) => states.push([s, d]));
const fds = [];
try { for (;;) fds.push(openSync('/dev/null', 'r')); } catch {}
closeSync(fds.pop()); closeSync(fds.pop());
const first = await u.start().then(() => 'ready', (e) => e.message);
await new Promise((r) => setTimeout(r, 400));
for (const fd of fds) closeSync(fd);
const ready = await u.whenReady(5000);
await u.close();
process.stdout.write(JSON.stringify({ first, ready, states: states.map(([s]) => s), reason: states[0][1] }));`;
    const r = spawnSync('prlimit', ['--nofile=256:256', process.execPath, '--input-type=module', '-e', src], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { first: string; ready: boolean; states: string[]; reason: string };
    expect(out.first).toMatch(/process could not start: .*EMFILE: the hub has no file descriptors left/);
    expect(out.reason).toBe(out.first);
    expect(out.states).not.toContain('failed');
    expect(out.ready).toBe(true);
  });

  // The real limit: RLIMIT_NPROC lowered (prlimit) to the tasks the hub already has, so its fork
  // fails with EAGAIN. Root is never held to it: as root, the hub (and prlimit, which may change
  // only a process of its own uid without CAP_SYS_RESOURCE) run as nobody, which must be able to
  // read dist/ (not so in a checkout under /root: then the case is skipped).
  const asNobody = process.getuid?.() === 0 ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] : [];
  const nobodyReads = (file: string): boolean =>
    asNobody.length === 0 || spawnSync(asNobody[0]!, [...asNobody.slice(1), process.execPath, '-e', `require('node:fs').accessSync(${JSON.stringify(file)})`]).status === 0;
  it('a stdio server the hub cannot spawn for want of processes (EAGAIN at its process limit) is no crash loop either: never failed, ready again about a second after the limit is lifted', async () => {
    if (!nobodyReads(join(packageRoot, 'dist/src/upstream/index.js'))) {
      // A checkout nobody may read (under /root): no process of another uid can run the hub's
      // code, so the limit cannot be set on one. What the spawn failure is taken for is checked
      // alone (not skipped: a skipped case would pass whatever the code did).
      const eagain = Object.assign(new Error('spawn EAGAIN'), { code: 'EAGAIN' });
      expect(hubShortOf(eagain)).toBe(true);
      expect(spawnFailure(eagain, undefined)).toMatch(/the hub may start no more processes now/);
      return;
    }
    const dist = (p: string) => JSON.stringify(pathToFileURL(join(packageRoot, 'dist/src', p)).href);
    const src = `import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
const { createUpstream } = await import(${dist('upstream/index.js')});
const { silentLogger } = await import(${dist('log.js')});
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const u = createUpstream({ id: 's', command: process.execPath, args: ['-e', ${JSON.stringify(LEGACY_ECHO)}], era: '2025-11-25', timeoutMs: 5000, probeTimeoutMs: 2000, maxFrameBytes: 1024 }, silentLogger, { backoff: { baseMs: 10 } });
const states = [];
u.on('state', (s, d) => states.push([s, d]));
process.stdout.write('threads ' + /Threads:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1] + '\\n');
await lines.next();
const first = await u.start().then(() => 'ready', (e) => e.message);
await new Promise((r) => setTimeout(r, 400));
process.stdout.write('lift\\n');
await lines.next();
const ready = await u.whenReady(5000);
await u.close();
process.stdout.write(JSON.stringify({ first, ready, states: states.map(([s]) => s), reason: states[0][1] }) + '\\n');
process.exit(0);`;
    const argv = [...asNobody, process.execPath, '--input-type=module', '-e', src];
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const out = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
      const line = async () => String((await out.next()).value);
      const threads = /^threads (\d+)$/.exec(await line())![1];
      const soft = /Max processes\s+(\S+)/.exec(readFileSync(`/proc/${child.pid}/limits`, 'utf8'))![1];
      const limit = [...asNobody, 'prlimit', '--pid', String(child.pid)];
      const prlimit = (v: string) => expect(spawnSync(limit[0]!, [...limit.slice(1), `--nproc=${v}:`], { encoding: 'utf8' }).stderr).toBe('');
      prlimit(threads);
      child.stdin!.write('go\n');
      expect(await line()).toBe('lift');
      prlimit(soft);
      child.stdin!.write('go\n');
      const r = JSON.parse(await line()) as { first: string; ready: boolean; states: string[]; reason: string };
      expect(r.first).toMatch(/process could not start: .*EAGAIN: the hub may start no more processes now/);
      expect(r.reason).toBe(r.first);
      // Counted as crashes, five attempts in the 400 ms made it `failed`, retried only after 60 s.
      expect(r.states).not.toContain('failed');
      expect(r.ready).toBe(true);
    } finally {
      child.kill();
    }
  });

  it('emits JSON-RPC lines as messages (a byte order mark before one ignored), skips the rest, and reports the exit', async () => {
    const c = new StdioChild({
      command: process.execPath,
      args: script(`
        process.stdout.write('\\ufeffnoise\\n\\ufeff{"jsonrpc":"2.0","method":"a"}\\r\\n[1]\\n{"jsonrpc":"2.0","id":1,"result":{}}\\n');
        setTimeout(() => process.exit(7), 50);`),
      maxFrameBytes: 1024,
      log: silentLogger,
    });
    const got: unknown[] = [];
    c.on('message', (m) => got.push(m));
    const exit = await c.exit;
    expect(exit).toEqual({ code: 7, signal: null });
    expect(got).toEqual([
      { kind: 'notification', msg: { jsonrpc: '2.0', method: 'a' } },
      { kind: 'response', msg: { jsonrpc: '2.0', id: 1, result: {} } },
    ]);
    expect(c.alive).toBe(false);
    expect(c.send('{}')).toBe(false);
  });

  it("counts the frames joined for this turn in its backlog, not only what the pipe's stream holds", async () => {
    // A process that never reads its input: what is written stays written.
    const c = new StdioChild({ command: process.execPath, args: script('setTimeout(() => {}, 60_000);'), maxFrameBytes: 1024, log: silentLogger });
    try {
      const frame = 'x'.repeat(100_000);
      // Joined (other calls in flight): they leave in one write at the end of the turn. Counted
      // before that, a loaded hub's turn that sent many calls passed every one of them under the
      // bound StdioUpstream refuses calls at (faults-stdio "stops reading its input", CI).
      for (let i = 0; i < 3; i++) expect(c.send(frame, true)).toBe(true);
      expect(c.backlog).toBe(3 * (frame.length + 1));
      await new Promise((r) => setImmediate(r));
      // Written now: the pipe took what it could, the stream holds the rest; nothing was lost from the count.
      expect(c.backlog).toBeGreaterThanOrEqual(3 * (frame.length + 1) - 256 * 1024);
      expect(c.backlog).toBeGreaterThan(0);
    } finally {
      c.kill();
    }
  });

  it('delivers a last frame written just before exiting', async () => {
    const c = new StdioChild({
      command: process.execPath,
      args: script(`process.stdout.write('{"jsonrpc":"2.0","id":9,"result":{"bye":true}}\\n', () => process.exit(1));`),
      maxFrameBytes: 1024,
      log: silentLogger,
    });
    const got: unknown[] = [];
    c.on('message', (m) => got.push(m));
    await new Promise((r) => c.once('exit', r));
    expect(got).toHaveLength(1);
  });

  it('delivers a last frame, and takes a last stderr line, that end without a newline', async () => {
    const c = new StdioChild({
      command: process.execPath,
      args: script(`process.stderr.write('fatal: gave up'); process.stdout.write('{"jsonrpc":"2.0","id":9,"result":{"bye":true}}', () => process.exit(0));`),
      maxFrameBytes: 1024,
      log: silentLogger,
    });
    const got: unknown[] = [];
    c.on('message', (m) => got.push(m));
    const exit = await c.exit;
    expect(got).toEqual([{ kind: 'response', msg: { jsonrpc: '2.0', id: 9, result: { bye: true } } }]);
    expect(exit.stderr).toBe('fatal: gave up');
  });

  it("does not give an ordinary log line written well before the exit as its reason (stderr: … read as the cause)", async () => {
    const c = new StdioChild({
      command: process.execPath,
      args: script(`process.stderr.write('listening on stdio\\n'); setTimeout(() => process.exit(1), 2300);`),
      maxFrameBytes: 1024,
      log: silentLogger,
    });
    expect((await c.exit).stderr).toBeUndefined();
  });

  it('logs the first stdout lines that are not JSON-RPC one by one, then only how many more there were', async () => {
    const logged: { msg: string; line?: string; lines?: number }[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => void logged.push(JSON.parse(l)) });
    const c = new StdioChild({
      command: process.execPath,
      args: script(`process.stdout.write('debug output\\n'.repeat(5000) + '{"jsonrpc":"2.0","id":1,"result":{}}\\n', () => process.exit(0));`),
      maxFrameBytes: 1024,
      log,
    });
    const got: unknown[] = [];
    c.on('message', (m) => got.push(m));
    await c.exit;
    expect(got).toHaveLength(1);
    const one = logged.filter((l) => l.msg === 'skipped a stdout line that is not JSON-RPC');
    expect(one).toHaveLength(10);
    expect(one[0]!.line).toBe('debug output');
    expect(logged.filter((l) => l.msg !== one[0]!.msg)).toEqual([expect.objectContaining({ lines: 4990, msg: 'skipped 4990 more stdout lines that are not JSON-RPC (not logged one by one)' })]);
  });

  it('logs a stderr flood up to 200 lines a second, counting the rest; the reason of its exit is still its last error line', async () => {
    const logged: { msg: string; stderr?: string; lines?: number; leftOutBefore?: number }[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void logged.push(JSON.parse(l)) });
    const started = Date.now();
    const c = new StdioChild({
      command: process.execPath,
      args: script(`process.stderr.write('noise token=sk-abcdefghijklmnopqrstuvwx\\n'.repeat(20000) + 'Error: the last word\\n', () => process.exit(3));`),
      maxFrameBytes: 1024,
      log,
    });
    const exit = await c.exit;
    const windows = Math.ceil((Date.now() - started) / 1000) + 1;
    expect(exit).toMatchObject({ code: 3, stderr: 'Error: the last word' });
    const lines = logged.filter((l) => l.msg === 'child stderr');
    expect(lines.length).toBeGreaterThanOrEqual(200);
    expect(lines.length).toBeLessThanOrEqual(200 * windows);
    expect(lines.every((l) => !l.stderr!.includes('abcdefgh'))).toBe(true);
    const rest = logged.filter((l) => l.msg.startsWith('left ') && l.msg.endsWith('more child stderr lines out of the log (over 200 a second)'));
    expect(rest).toHaveLength(1);
    // Every line is either logged or counted, once.
    expect(lines.length + lines.reduce((n, l) => n + (l.leftOutBefore ?? 0), 0) + rest[0]!.lines!).toBe(20001);
  });

  it('redacts a skipped line before cutting it to its 200 characters: a token across the cut shows no part of it', async () => {
    const logged: { msg: string; line?: string }[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => void logged.push(JSON.parse(l)) });
    const c = new StdioChild({
      command: process.execPath,
      args: script(`process.stdout.write('x'.repeat(180) + ' Bearer abcdefghijklmnopqrstuvwxyz0123456789\\n', () => process.exit(0));`),
      maxFrameBytes: 1024,
      log,
    });
    await c.exit;
    const line = logged.find((l) => l.msg === 'skipped a stdout line that is not JSON-RPC')?.line;
    expect(line).toMatch(/^x{180} Bearer \[redac/);
    expect(line).not.toContain('abcdefgh');
  });

  /** A child that echoes its stdin to stdout and exits when stdin ends; `got`: what came back. */
  const echoChild = () => {
    const c = new StdioChild({
      command: process.execPath,
      args: script(`process.stdin.on('data', (d) => process.stdout.write(d)); process.stdin.on('end', () => process.exit(0));`),
      maxFrameBytes: 1024,
      log: silentLogger,
    });
    const got: unknown[] = [];
    c.on('message', (m) => got.push(m));
    return { c, got };
  };

  it('writes one frame per line and closes politely when stdin ends', async () => {
    const { c, got } = echoChild();
    expect(c.send('{"jsonrpc":"2.0","method":"x"}')).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    expect(await c.close()).toEqual({ code: 0, signal: null }); // not SIGTERM after the 2 s grace
    expect(Date.now() - t0).toBeLessThan(1800);
    expect(got).toEqual([{ kind: 'notification', msg: { jsonrpc: '2.0', method: 'x' } }]);
  });

  it('joins frames sent with `join` into one write at the end of the turn, in order, writes the others at once, and flushes before closing', async () => {
    const { c, got } = echoChild();
    const write = vi.spyOn(Socket.prototype, 'write');
    const ours = () => write.mock.calls.map(([chunk]) => String(chunk)).filter((t) => t.includes('"method":"n"'));
    const frame = (i: number) => `{"jsonrpc":"2.0","method":"n","params":{"i":${i}}}`;
    try {
      expect(c.send(frame(0))).toBe(true);
      expect(ours()).toHaveLength(1); // not joined: written at once
      for (let i = 1; i < 20; i++) expect(c.send(frame(i), true)).toBe(true);
      expect(c.send(frame(20))).toBe(true); // not joined, but frames are queued: it must not overtake them
      expect(ours()).toHaveLength(1);
      await new Promise((r) => setImmediate(r));
      expect(ours()).toHaveLength(2);
      expect(ours()[1]!.split('\n')).toHaveLength(21);
    } finally {
      write.mockRestore();
    }
    // The child may still be starting on a busy machine: wait for the echoes, not a fixed time.
    for (const deadline = Date.now() + 10_000; got.length < 21 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
    expect(got.map((m) => (m as { msg: { params: { i: number } } }).msg.params.i)).toEqual([...Array(21).keys()]);
    // Queued and closed in the same turn: the frame still reaches the child before its stdin ends.
    c.send('{"jsonrpc":"2.0","method":"last"}', true);
    expect(await c.close()).toEqual({ code: 0, signal: null });
    expect(got.at(-1)).toEqual({ kind: 'notification', msg: { jsonrpc: '2.0', method: 'last' } });
  });

  it('reports a command that does not exist without throwing', async () => {
    const c = new StdioChild({ command: '/nonexistent/binary', maxFrameBytes: 1024, log: silentLogger });
    expect(c.pid).toBeUndefined();
    const e = await c.exit;
    expect(e.error).toMatch(/ENOENT/);
    expect(await c.close()).toBe(e);
  });

  it('says in words that a command is not found or not executable, naming it', async () => {
    const missing = await new StdioChild({ command: 'switchyard-no-such-command', maxFrameBytes: 1024, log: silentLogger }).exit;
    expect(missing.error).toBe('spawn switchyard-no-such-command ENOENT: command "switchyard-no-such-command" not found (not installed, or not on the PATH the server is given)');
    // A shell line pasted whole into `command`.
    const line = await new StdioChild({ command: 'npx -y @modelcontextprotocol/server-memory', maxFrameBytes: 1024, log: silentLogger }).exit;
    expect(line.error).toBe(
      'spawn npx -y @modelcontextprotocol/server-memory ENOENT: command "npx -y @modelcontextprotocol/server-memory" not found: `command` names the program alone (here "npx"), each of its arguments goes in `args`',
    );
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-noexec-'));
    const file = join(dir, 'server.mjs');
    writeFileSync(file, 'process.exit(0)\n', { mode: 0o644 });
    const noexec = await new StdioChild({ command: file, maxFrameBytes: 1024, log: silentLogger }).exit;
    expect(noexec.error).toBe(`spawn ${file} EACCES: command "${file}" is not executable (no execute permission on it, or on a folder of its path)`);
    const shebang = join(dir, 'server.py');
    writeFileSync(shebang, '#!/nonexistent/python9\n', { mode: 0o755 });
    const interp = await new StdioChild({ command: shebang, maxFrameBytes: 1024, log: silentLogger }).exit;
    expect(interp.error).toBe(`spawn ${shebang} ENOENT: command "${shebang}" is there, but the interpreter its first line (#!) names was not found`);
  });

  it("gives npx's failure to fetch a package as why it exited, not npm's pointer to its debug log", async () => {
    // --offline: a package in no cache fails at once (ENOTCACHED), with no network.
    const e = await new StdioChild({ command: 'npx', args: ['--offline', '-y', 'switchyard-no-such-package-5d41402abc4b2a76'], maxFrameBytes: 1024, log: silentLogger }).exit;
    expect(e.code).not.toBe(0);
    expect(e.stderr).toMatch(/^npm (error|ERR!) .*(failed|not found|404)/i);
    expect(e.stderr).not.toMatch(/complete log/);
  }, 30_000);

  it('says so when its working directory is missing or no directory, rather than blaming the command', async () => {
    const c = new StdioChild({ command: process.execPath, args: script('1'), cwd: '/nonexistent/switchyard-dir', maxFrameBytes: 1024, log: silentLogger });
    expect((await c.exit).error).toBe('its working directory /nonexistent/switchyard-dir does not exist (cwd)');
    expect(() => new StdioChild({ command: process.execPath, args: script('1'), cwd: process.execPath, maxFrameBytes: 1024, log: silentLogger })).toThrow(
      `its working directory ${process.execPath} is not a directory (cwd)`,
    );
  });

  it('merges env over the hub environment and honours cwd', async () => {
    const c = new StdioChild({
      command: process.execPath,
      args: script(`process.stdout.write(JSON.stringify({jsonrpc:'2.0',method:'env',params:{x:process.env.SY_X,path:!!process.env.PATH,cwd:process.cwd()}})+'\\n')`),
      env: { SY_X: 'y' },
      cwd: '/tmp',
      maxFrameBytes: 1024,
      log: silentLogger,
    });
    const got = await new Promise((r) => c.once('message', r));
    expect(got).toMatchObject({ msg: { params: { x: 'y', path: true, cwd: '/tmp' } } });
    await c.close();
  });
});

describe('stderrReason', () => {
  it("picks the line that says why from a crash's stderr: the last error-like one, else the last; never Node's version line", () => {
    const node = ['node:internal/modules/cjs/loader:1228', '  throw err;', '  ^', '', "Error: Cannot find module '/x/later.mjs'", '    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)', "  code: 'MODULE_NOT_FOUND',", '  requireStack: []', '}', '', 'Node.js v20.20.2'];
    expect(stderrReason(node)).toBe("Error: Cannot find module '/x/later.mjs'");
    expect(stderrReason(['Traceback (most recent call last):', '  File "s.py", line 1, in <module>', "ModuleNotFoundError: No module named 'mcp'"])).toBe("ModuleNotFoundError: No module named 'mcp'");
    expect(stderrReason(['starting', 'bye'])).toBe('bye');
    expect(stderrReason(['', 'Node.js v20.20.2'])).toBeUndefined();
    expect(stderrReason(['x'.repeat(500) + ' error'])!.length).toBe(200);
  });

  it("reads npm's lines (npx) for what they say: not its pointer to its debug log, not its warnings, not every line for its `npm error` prefix", () => {
    const npm9 = [
      'npm ERR! code E404',
      'npm ERR! 404 Not Found - GET https://registry.npmjs.org/nope - Not found',
      'npm ERR! 404',
      "npm ERR! 404  'nope@*' is not in this registry.",
      'npm ERR! 404 Note that you can also install from a',
      'npm ERR! 404 tarball, folder, http url, or git url.',
      '',
      'npm ERR! A complete log of this run can be found in:',
      'npm ERR!     /home/u/.npm/_logs/2024-01-01T00_00_00_000Z-debug-0.log',
    ];
    expect(stderrReason(npm9)).toBe('npm ERR! 404 Not Found - GET https://registry.npmjs.org/nope - Not found');
    const npm11 = ['npm error code E404', 'npm error 404 Not Found - GET https://registry.npmjs.org/nope', 'npm error 404', 'npm error A complete log of this run can be found in: /root/.npm/_logs/2026-01-01T00_00_00_000Z-debug-0.log'];
    expect(stderrReason(npm11)).toBe('npm error 404 Not Found - GET https://registry.npmjs.org/nope');
    // The package was fetched, then the server exited with its usage text: that is why.
    const usage = ['npm warn exec The following package was not found and will be installed: @modelcontextprotocol/server-filesystem@2025.8.21', 'Usage: mcp-server-filesystem [allowed-directory] [additional-directories...]'];
    expect(stderrReason(usage)).toBe(usage[1]);
    expect(stderrReason(['npm error A complete log of this run can be found in: /root/.npm/_logs/x-debug-0.log'])).toBeUndefined();
  });

  it('takes a line for the reason only if written shortly before the exit: an error-like one within 30 s, any other within 2 s', () => {
    const at = (text: string, ago: number) => ({ text, at: 100_000 - ago });
    expect(stderrReason([at('listening on stdio', 2_500)], 100_000)).toBeUndefined();
    expect(stderrReason([at('listening on stdio', 1_000)], 100_000)).toBe('listening on stdio');
    expect(stderrReason([at('Error: db gone', 20_000), at('retrying', 19_000)], 100_000)).toBe('Error: db gone');
    expect(stderrReason([at('Error: bad config, using defaults', 3_600_000), at('listening on stdio', 3_500_000)], 100_000)).toBeUndefined();
    expect(stderrReason([at('Error: bad config, using defaults', 3_600_000), at('usage: server --root DIR', 10)], 100_000)).toBe('usage: server --root DIR');
  });
});
