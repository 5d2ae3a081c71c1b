/**
 * The hub's downstream wire over real stdio, both eras: `switchyard stdio` (the hub in the
 * client's own process) and `switchyard connect` (a bridge to a running daemon over HTTP), fed
 * the frames of wire-frames.ts as lines. Each frame gets its era's code under the id it was sent
 * with (none when unreadable), a notification or a client's response nothing at all; stdout
 * carries JSON-RPC lines only; every request has exactly one ledger row; the process stays up
 * and serves. wire-fuzz-http.test.ts runs the same frames over HTTP, with their headers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForState } from './faults-helpers.js';
import { rowsThrough } from './ledger-helpers.js';
import { answerProblem, batchFrames, BATCHES, frames, isFinal, LEGACY, MAX_BODY, request, wellFormed, type Frame, type FrameOf, type Msg, type Owed } from './wire-frames.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 250);
const SEED = Number(process.env.FUZZ_SEED ?? 70_2026);

const config = (dir: string): Record<string, unknown> => ({
  ledger: { path: join(dir, 'ledger.db') },
  listen: { maxBodyBytes: MAX_BODY },
  servers: {
    ql: nodeServer('test/fixtures/quirks/legacy-32601.mjs'),
    qm: nodeServer('test/fixtures/quirks/modern.mjs'),
    // A tool whose argument an HTTP client mirrors in Mcp-Param-Text (x-mcp-header).
    hdr: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], {
      ERA: 'modern',
      TOOLS: JSON.stringify([{ name: 'echo', description: 'Echo', inputSchema: { type: 'object', properties: { text: { type: 'string', 'x-mcp-header': 'Text' } } } }]),
    }),
  },
});

/** A process spoken to in lines: everything it wrote to stdout, and waits for what it writes next. */
class Lines {
  readonly lines: string[] = [];
  readonly msgs: (Msg | undefined)[] = [];
  stderr = '';
  private buf = '';
  private waiters: { from: number; pred: (m: Msg) => boolean; resolve: (i: number) => void }[] = [];

  constructor(readonly proc: ChildProcess) {
    proc.stdout!.setEncoding('utf8');
    proc.stdout!.on('data', (d: string) => {
      this.buf += d;
      let i;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        let v: unknown;
        try {
          v = JSON.parse(line);
        } catch {
          v = undefined;
        }
        this.lines.push(line);
        // A 2025-03-26 batch's answers come as one line holding their array: each is a message.
        for (const m of Array.isArray(v) ? (v as Msg[]) : [v as Msg | undefined]) {
          this.msgs.push(m);
          const at = this.msgs.length - 1;
          for (const w of [...this.waiters]) {
            if (at >= w.from && m !== undefined && w.pred(m)) {
              this.waiters.splice(this.waiters.indexOf(w), 1);
              w.resolve(at);
            }
          }
        }
      }
    });
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (d: string) => (this.stderr = (this.stderr + d).slice(-400_000)));
  }

  send(line: string): void {
    this.proc.stdin!.write(line + '\n');
  }

  /** The place of the first message at or after `from` that `pred` takes. */
  next(from: number, pred: (m: Msg) => boolean, what: string, ms = 20_000): Promise<number> {
    for (let i = from; i < this.msgs.length; i++) if (this.msgs[i] !== undefined && pred(this.msgs[i]!)) return Promise.resolve(i);
    return new Promise((resolve, reject) => {
      const w = { from, pred, resolve: (i: number) => (clearTimeout(t), resolve(i)) };
      const t = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error(`no ${what} within ${ms} ms; stderr: ${this.stderr.slice(-1500)}`));
      }, ms);
      this.waiters.push(w);
    });
  }

  /** The final message answering `id`, from `from` on. */
  async answer(from: number, id: string | number, ms?: number): Promise<Msg> {
    return this.msgs[await this.next(from, (m) => isFinal(m) && m.id === id, `answer to ${JSON.stringify(id)}`, ms)]!;
  }

  stop(): Promise<number | null> {
    this.proc.stdin!.end();
    return new Promise((r) => (this.proc.exitCode !== null ? r(this.proc.exitCode) : this.proc.once('exit', (c) => r(c))));
  }
}

interface Edge {
  lines: Lines;
  db: string;
  daemon?: HubProcess;
}

const modernLine = (id: string): string => JSON.stringify(request('modern', id, 'tools/list'));

async function initialize(c: Lines, version: string): Promise<void> {
  const from = c.msgs.length;
  c.send(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'wire-fuzz', version: '1' } } }));
  expect((await c.answer(from, 'init', 45_000)).result).toMatchObject({ protocolVersion: version });
  c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
}

/** Its session's version: 2025-03-26, the one revision with batches, on a process of its own. */
describe.each([
  ['stdio', LEGACY],
  ['connect', LEGACY],
  ['stdio', BATCHES],
  ['connect', BATCHES],
] as const)('frames of both eras over switchyard %s, a %s session', (mode, sessionVersion) => {
  const legacyEra = sessionVersion === BATCHES ? 'batches' : 'legacy';
  let edge: Edge;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), `switchyard-wire-${mode}-${legacyEra}-`));
    const env = { ...process.env, SWITCHYARD_LOG_LEVEL: 'info' };
    if (mode === 'stdio') {
      const file = join(dir, 'hub.config.json');
      writeFileSync(file, JSON.stringify(config(dir)));
      edge = { lines: new Lines(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] })), db: join(dir, 'ledger.db') };
    } else {
      const daemon = await startHub(config(dir), { dir, env: { SWITCHYARD_LOG_LEVEL: 'info' } });
      await waitForState(daemon.url, 'ql', ['ready']);
      await waitForState(daemon.url, 'qm', ['ready']);
      edge = { lines: new Lines(spawn(process.execPath, [BIN, 'connect', '--url', daemon.url], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] })), db: join(dir, 'ledger.db'), daemon };
    }
    await initialize(edge.lines, sessionVersion);
  }, 90_000);

  afterAll(async () => {
    expect(await edge?.lines.stop()).toBe(0);
    if (edge?.daemon) expect(await edge.daemon.stop()).toBe(0);
  });

  it('a modern request whose method or name no header can carry is answered as its method decides: -32601, -32602', async () => {
    const c = edge.lines;
    const from = c.msgs.length;
    // connect mirrors the method in Mcp-Method and the name in Mcp-Name: it sent no request for
    // the first (-32603, 'the hub … is not reachable'), and the hub said a header it made from the
    // second did not match.
    c.send(JSON.stringify(request('modern', 'plain-method', 'x/caf\u00e9')));
    c.send(JSON.stringify(request('modern', 'plain-method-2', ' tools/list')));
    c.send(JSON.stringify(request('modern', 'plain-name', 'tools/call', { name: 'qm__echo\ud800', arguments: {} })));
    expect((await c.answer(from, 'plain-method')).error?.code).toBe(-32601);
    expect((await c.answer(from, 'plain-method-2')).error?.code).toBe(-32601);
    expect((await c.answer(from, 'plain-name')).error?.code).toBe(-32602);
  });

  it('a call whose x-mcp-header argument has a lone surrogate runs, as over stdio (no header can mirror it, so none is held to it)', async () => {
    const c = edge.lines;
    const from = c.msgs.length;
    // connect learns the tool's annotation from a list, then mirrors the argument as U+FFFD's sentinel.
    c.send(JSON.stringify(request('modern', 'hdr-list', 'tools/list')));
    await c.answer(from, 'hdr-list');
    for (const era of ['modern', 'legacy'] as const) {
      c.send(JSON.stringify(request(era, `hdr-${era}`, 'tools/call', { name: 'hdr__echo', arguments: { text: 'a\ud800b' } })));
      const m = await c.answer(from, `hdr-${era}`);
      expect(m.error, era).toBeUndefined();
      expect(JSON.stringify(m.result), era).toContain('a\\ud800b');
    }
  });

  it('each gets its era’s code and id (or nothing), stdout is JSON-RPC only, one ledger row per request', async () => {
    const c = edge.lines;
    const from0 = c.msgs.length;
    c.send(modernLine('wire-start'));
    await c.answer(from0, 'wire-start', 45_000);
    const before = (await rowsThrough(edge.db, 'wire-start')).length;
    const start = c.msgs.length;
    let n = 0;
    let rows = 0;
    let finals = 0;
    let idless = 0;
    const rowIds: string[] = [];
    const rowChecks: [string, NonNullable<Frame['rowCheck']>][] = [];
    const all = fc.oneof(frames('modern'), frames(legacyEra), batchFrames(legacyEra), batchFrames('modern'));
    await fc.assert(
      fc.asyncProperty(all, async (of: FrameOf) => {
        const f = of(`${mode[0]}${++n}`);
        if (f.httpOnly) return;
        const taken = legacyEra === 'batches' && f.batchSessionOwed !== undefined;
        const owed: Owed = taken ? f.batchSessionOwed! : (f.stdioOwed ?? f.owed);
        rows += (taken ? 0 : f.rows) + 1;
        if (f.rowId !== undefined) rowIds.push(f.rowId);
        if (f.rowId !== undefined && f.rowCheck) rowChecks.push([f.rowId, f.rowCheck]);
        const where = `${f.kind} (${f.era}): ${f.text.slice(0, 300)}`;
        const from = c.msgs.length;
        const sentinel = `sentinel-${mode}-${n}`;
        c.send(f.text);
        c.send(modernLine(sentinel));
        await c.answer(from, sentinel);
        expect(c.proc.exitCode, where).toBeNull();
        finals++;
        if (owed.none) return;
        const answerOf = async (o: Owed): Promise<Msg> => {
          finals++;
          if (o.id !== undefined) return c.answer(from, o.id);
          // Answers without an id, counted: the k-th such answer is this frame's.
          const k = ++idless;
          let seen = 0;
          return c.msgs[await c.next(start, (x) => isFinal(x) && x.id === undefined && ++seen === k, `id-less answer #${k} (${where})`)]!;
        };
        for (const o of owed.members ?? [owed]) {
          const m = await answerOf(o);
          expect(answerProblem({ ...o, status: undefined }, m), `${where} → ${JSON.stringify(m).slice(0, 300)}`).toBeNull();
          if (f.check) expect(f.check(m), where).toBeNull();
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
    // Most frames fit stdio (the rest are about HTTP headers): the run was no empty one.
    expect(finals).toBeGreaterThan(RUNS / 2);
    const endFrom = c.msgs.length;
    c.send(modernLine('wire-end'));
    await c.answer(endFrom, 'wire-end');
    // Nothing but JSON-RPC on stdout, and no answer to what is owed none (a notification, a response).
    const problem = (l: string): string | null => {
      let v: unknown;
      try {
        v = JSON.parse(l);
      } catch {
        return 'not JSON';
      }
      // An array only as a 2025-03-26 session's answer to a batch, never empty.
      if (!Array.isArray(v)) return wellFormed(v);
      if (legacyEra !== 'batches' || v.length === 0) return 'an array';
      return v.map(wellFormed).find((p) => p !== null) ?? null;
    };
    const bad = c.lines.map((l) => [l.slice(0, 200), problem(l)]).filter(([, p]) => p !== null);
    expect(bad).toEqual([]);
    expect(c.msgs.slice(start, endFrom).filter((m) => m !== undefined && isFinal(m)).length).toBe(finals);
    // Exactly one row a request.
    const after = await rowsThrough(edge.db, 'wire-end');
    const byId = new Map<string, number>();
    for (const r of after) if (r.requestIdType === 'string') byId.set(String(r.requestId), (byId.get(String(r.requestId)) ?? 0) + 1);
    expect(rowIds.filter((id) => byId.get(id) !== 1).map((id) => [id, byId.get(id) ?? 0])).toEqual([]);
    expect(rowChecks.map(([id, check]) => check(after.find((r) => r.requestId === id)!)).filter((p) => p !== null)).toEqual([]);
    expect(after.length - before).toBe(rows + 1);
    // Still up, and serving a call of each upstream.
    expect(c.proc.exitCode).toBeNull();
    for (const tool of ['ql__echo', 'qm__echo']) {
      const from = c.msgs.length;
      c.send(JSON.stringify(request('modern', `after-${tool}`, 'tools/call', { name: tool, arguments: { ok: 1 } })));
      expect((await c.answer(from, `after-${tool}`)).result, tool).toMatchObject({ structuredContent: { args: { ok: 1 } } });
    }
    const logs = c.stderr + (edge.daemon ? edge.daemon.logs.join('\n') : '');
    expect(logs).not.toMatch(/request handler failed|unexpected error while handling|uncaught|unhandled/i);
    if (edge.daemon) expect(edge.daemon.stdout()).toBe('');
  }, 240_000);
});
