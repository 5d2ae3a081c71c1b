/**
 * Fault suite, the hub's own life (issue 6, cases 3 and 6): SIGKILL under load leaves no
 * process behind (children, `npx`-style grandchildren, the watchdog) and a restarted hub's
 * ledger verifies; SIGTERM drains calls in flight and exits 0; hot reload adds, removes and
 * changes servers while calls run on the others, rejects an invalid config, and answers SIGHUP.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi, type TestContext } from 'vitest';
import WebSocket from 'ws';
import { sha256Hex } from '../helpers/auth.js';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { rawClient } from '../helpers/raw-http.js';
import { modernBody, modernHeaders, post } from '../helpers/wire.js';
import { ledgerCli, modernCall, queryRows, sleep, SDK1, SDK2, type Json } from './ledger-helpers.js';
import { quirkLog } from './upstream-helpers.js';
import { MODERN_FIXTURE, USER_CAPABILITIES } from '../fixtures/translation/peers.js';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { callTool, descendants, expectAllGone, isToolError, QUIRKS, rowsFor, serverHealth, startFaultHttp, text, waitForState, waitUntil } from './faults-helpers.js';

/**
 * A hub of this test's own, killed when the test ends if it is still up: each test cleans up
 * only what it started, so the tests of a describe.concurrent block run side by side (their
 * time is mostly waits: hub starts, slow calls, drains). Hooks of the test's own context: a
 * file-wide afterEach cannot tell concurrent tests apart.
 */
async function start(t: Pick<TestContext, 'onTestFinished'>, config: Record<string, unknown>, opts: { dir?: string; args?: string[]; env?: NodeJS.ProcessEnv } = {}): Promise<HubProcess> {
  const h = await startHub(config, opts);
  // A hub already killed by a test has nothing left to stop (stop() would wait for its exit).
  t.onTestFinished(async () => {
    if (h.proc.exitCode === null && h.proc.signalCode === null) await h.stop('SIGKILL');
  });
  return h;
}

function toolNames(list: { body?: { result?: Json } }): string[] {
  return ((list.body?.result?.tools ?? []) as { name: string }[]).map((t) => t.name);
}

function rewrite(file: string, change: (c: { servers: Record<string, Json> } & Json) => void): void {
  const c = JSON.parse(readFileSync(file, 'utf8')) as { servers: Record<string, Json> } & Json;
  change(c);
  writeFileSync(file, JSON.stringify(c, null, 2));
}

// Alone: its twelve callers load the machine, and it counts the hub's processes. The describe
// blocks after it run side by side (describe.concurrent), each test with its own hub; at most
// three blocks at once and three tests of a block (vitest limits each level), so that hubs
// starting together on two cores do not push a test to its timeout.
vi.setConfig({ maxConcurrency: 3 });

describe('hub SIGKILL', () => {
  it('under load leaves no child, grandchild or watchdog behind; restarted, its ledger verifies', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-kill-'));
    const gLog = join(dir, 'g.log');
    const config = {
      servers: {
        a: nodeServer(SDK1, [], { COUNTER_FILE: join(dir, 'counter.json') }),
        m: nodeServer(SDK2),
        g: nodeServer(`${QUIRKS}/spawns-grandchild.mjs`, [], { QUIRK_LOG: gLog, QUIRK_STUBBORN: '1' }),
      },
    };
    const hub = await start(t, config, { dir });
    await Promise.all(['a', 'm', 'g'].map((id) => waitForState(hub.url, id, ['ready'])));
    const grandchild = await waitUntil('grandchild pid', async () => quirkLog(gLog).find((e) => e.grandchild !== undefined)?.grandchild);
    let stop = false;
    let answered = 0;
    const worker = async (w: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const tool = ['a__echo', 'm__echo', 'a__counter_bump'][(w + i) % 3];
        const args = tool === 'a__counter_bump' ? { label: `w${w}` } : { text: `w${w}-${i}` };
        try {
          const r = await modernCall(hub.url, `w${w}-${i}`, 'tools/call', { name: tool, arguments: args });
          if (r.body) answered++;
        } catch {
          return; // the hub is gone
        }
      }
    };
    const workers = Array.from({ length: 12 }, (_, w) => worker(w));
    // Killed under load, once it has served some (a fixed 1.5 s saw 14 answers on a loaded machine).
    await waitUntil('more than 20 calls answered', async () => answered > 20);
    const tree = descendants(hub.proc.pid!);
    expect(tree).toContain(grandchild);
    expect(tree.length).toBeGreaterThanOrEqual(5); // 3 servers, the grandchild, the watchdog
    hub.proc.kill('SIGKILL');
    stop = true;
    await Promise.all(workers);
    expect(answered).toBeGreaterThan(20);
    // The stubborn server ignores stdin EOF and SIGTERM: only the watchdog's SIGKILL ends it.
    await expectAllGone(tree);

    const again = await start(t, config, { dir });
    const v = await ledgerCli(join(dir, 'ledger.db'), ['verify']);
    expect(v.code, v.stdout + v.stderr).toBe(0);
    await waitForState(again.url, 'a', ['ready']);
    expect(text(await callTool(again.url, 'a__echo', { text: 'back' }))).toBe('echo:back');
    const tree2 = descendants(again.proc.pid!);
    expect(await again.stop('SIGTERM')).toBe(0);
    await expectAllGone(tree2);
  }, 60_000);
});

describe.concurrent('a server restarted by the operator', () => {
  it('leaves no grandchild behind when its leader exits at the end of stdin and the grandchild ignores SIGTERM', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-grandchild-'));
    const gLog = join(dir, 'g.log');
    // The leader (an npx-like wrapper) exits when its stdin ends; what it started ignores SIGTERM.
    const hub = await start(t, { servers: { g: nodeServer(`${QUIRKS}/spawns-grandchild.mjs`, [], { QUIRK_LOG: gLog, QUIRK_GRANDCHILD_STUBBORN: '1' }) } }, { dir });
    await waitForState(hub.url, 'g', ['ready']);
    const first = await waitUntil('grandchild pid', async () => quirkLog(gLog).find((e) => e.grandchild !== undefined)?.grandchild);
    expect((await fetch(new URL('/admin/servers/g/restart', hub.url), { method: 'POST' })).status).toBe(200);
    // SIGTERM when the leader is gone, SIGKILL after the grace (2 s) for what is left.
    await expectAllGone([first], 6_000);
    await waitForState(hub.url, 'g', ['ready']);
  }, 30_000);
});

describe.concurrent('hub SIGTERM', () => {
  it('stops accepting, lets a call in flight finish, closes the upstreams and exits 0', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-term-'));
    const hub = await start(t, { servers: { a: nodeServer(SDK1) } }, { dir });
    await waitForState(hub.url, 'a', ['ready']);
    const tree = descendants(hub.proc.pid!);
    const slow = callTool(hub.url, 'a__slow', { ms: 1500 });
    await waitUntil('the call in flight', async () => (await serverHealth(hub.url, 'a')).inFlight === 1);
    const exited = hub.stop('SIGTERM');
    // The hub stops accepting as it logs this (a fixed 200 ms was too short on a loaded machine).
    await waitUntil('the hub draining', async () => hub.logs.some((l) => l.includes('draining calls in flight')));
    // New work is refused (the listener is closed).
    await expect(callTool(hub.url, 'a__echo', { text: 'late' })).rejects.toThrow();
    const a = await slow;
    expect(isToolError(a)).toBe(false);
    expect(text(a)).toBe('slept 1500');
    expect(await exited).toBe(0);
    await expectAllGone(tree);
    expect(hub.logs.some((l) => l.includes('draining calls in flight'))).toBe(true);
    // The ledger was flushed before the exit: the drained call's row is there.
    const [row] = await rowsFor(join(dir, 'ledger.db'), 'a__slow');
    expect(row.outcome).toBe('ok');
  }, 30_000);

  // A legacy client's call waiting for its answer to a question the hub relayed from a modern
  // upstream's input_required waits on the hub alone: closing the upstreams did not end it, and
  // the hub exited with the client unanswered (its own timeout) and the row in flight.
  it('at the drain deadline, calls still running get an answer and a row before the exit, one waiting for its client\'s answer too', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-term2-'));
    const hub = await start(t, { listen: { drainTimeoutMs: 300 }, policy: { confirm: ['a__echo'] }, servers: { a: nodeServer(SDK1), ms: nodeServer(MODERN_FIXTURE) } }, { dir });
    await waitForState(hub.url, 'a', ['ready']);
    await waitForState(hub.url, 'ms', ['ready']);
    const asker = new ClientV1({ name: 'never-answers', version: '1' }, { capabilities: USER_CAPABILITIES });
    let asked = false;
    asker.setRequestHandler(ElicitRequestSchema, () => {
      asked = true;
      return new Promise<never>(() => undefined);
    });
    await asker.connect(new TransportV1(new URL(hub.url)));
    const waiting = asker.callTool({ name: 'ms__elicit_form', arguments: {} }, undefined, { timeout: 20_000 }).then(
      () => undefined,
      (e: { code?: number; message?: string }) => e,
    );
    await waitUntil('the question asked', async () => asked);
    asked = false;
    // And one waiting for its user's confirmation (policy.confirm), sent nowhere yet.
    const confirming = asker.callTool({ name: 'a__echo', arguments: { text: 'x' } }, undefined, { timeout: 20_000 }).then(
      () => undefined,
      (e: { code?: number; message?: string }) => e,
    );
    const slow = callTool(hub.url, 'a__slow', { ms: 5000 });
    // A legacy session's call running upstream is told what the closing upstream says, as before.
    // (A client that cannot be asked: the asker's calls to a legacy stdio server run alone, so
    // its call would wait behind the other one, sent nowhere.)
    const plain = new ClientV1({ name: 'cannot-be-asked', version: '1' });
    await plain.connect(new TransportV1(new URL(hub.url)));
    const legacySlow = plain.callTool({ name: 'a__slow', arguments: { ms: 5000 } }, undefined, { timeout: 20_000 });
    await waitUntil('the calls in flight', async () => (await serverHealth(hub.url, 'a')).inFlight === 2);
    await waitUntil('the question asked', async () => asked);
    // `a`, its call in flight keeping it up past the end of its stdin, exits at the stop's SIGTERM, 2 s after that end.
    const aPid = descendants(hub.proc.pid!).find((p) => readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('sdk1-server'));
    expect(aPid).toBeDefined();
    const aRan = () => {
      try {
        process.kill(aPid!, 0);
        return true;
      } catch {
        return false;
      }
    };
    const answeredWhileARan: boolean[] = [];
    for (const p of [waiting, confirming]) void p.then(() => answeredWhileARan.push(aRan()));
    const t0 = Date.now();
    const exited = hub.stop('SIGTERM');
    const a = await slow;
    expect(Date.now() - t0).toBeLessThan(4_000);
    expect(isToolError(a)).toBe(true);
    expect(text(a)).toMatch(/was closed|connection lost/);
    const l = await legacySlow;
    expect(l.isError).toBe(true);
    expect(JSON.stringify(l.content)).toMatch(/was closed|connection lost/);
    expect(await waiting).toMatchObject({ code: -32603, message: expect.stringContaining('the hub is shutting down') });
    expect(await confirming).toMatchObject({ code: -32603, message: expect.stringContaining('the hub is shutting down') });
    // Answered as the drain time ends, before the upstreams are closed (it waits on the hub
    // alone): it was answered only once every one was, their processes' exit included, 2 s
    // and more later. Unanswered, it waited for its own 20 s timeout.
    expect(answeredWhileARan).toEqual([true, true]);
    expect(await exited).toBe(0);
    const [row] = await rowsFor(join(dir, 'ledger.db'), 'a__slow');
    expect(row.outcome).toBe('unavailable');
    const [asking] = await rowsFor(join(dir, 'ledger.db'), 'ms__elicit_form');
    expect(asking).toMatchObject({ outcome: 'unavailable', errorMessage: expect.stringContaining('the hub is shutting down') });
    const [confirmRow] = await rowsFor(join(dir, 'ledger.db'), 'a__echo');
    expect(confirmRow).toMatchObject({ outcome: 'unavailable', errorMessage: expect.stringContaining('the hub is shutting down') });
    await asker.close().catch(() => undefined);
    await plain.close().catch(() => undefined);
  }, 30_000);
});

describe.concurrent('hub SIGTERM, requests waiting for a server', () => {
  /** `server` (a node fixture), started through start-delay.mjs with `env`. */
  const delayed = (server: Record<string, unknown>, env: Record<string, string>): Record<string, unknown> => ({
    ...server,
    args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(server.args as string[])],
    env: { ...(server.env as Record<string, string>), ...env },
  });

  // They waited out the rest of the start-up grace (here, until the drain deadline closed the
  // server still starting): the stop held for requests nothing upstream was running for.
  it("a list, a legacy initialize and a modern discover waiting in the start-up grace are answered the stop's error as it begins", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-term-grace-'));
    // Never answers its handshake (within the test); gone at the end of its stdin, as the stop closes it.
    const late = { command: process.execPath, args: ['-e', "process.stdin.on('end', () => process.exit(0)).resume()"] };
    const hub = await start(t, { listen: { drainTimeoutMs: 20_000 }, servers: { a: nodeServer(SDK1), late } }, { dir, env: { SWITCHYARD_STARTUP_GRACE_MS: '60000' } });
    await waitForState(hub.url, 'a', ['ready']);
    const list = modernCall(hub.url, 'l1', 'tools/list');
    const discover = modernCall(hub.url, 'd1', 'server/discover');
    const init = post(hub.url, { jsonrpc: '2.0', id: 'i1', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw-legacy', version: '1' } } }, { 'content-type': 'application/json', accept: 'application/json, text/event-stream' });
    await waitUntil('the three requests in the grace', async () => hub.logs.filter((l) => l.includes('waits in the start-up grace')).length >= 3);
    const t0 = Date.now();
    const exited = hub.stop('SIGTERM');
    const answers = await Promise.all([list.then((r) => r.body), discover.then((r) => r.body), init.then((r) => r.body)]);
    // Well before the drain deadline (20 s), when they were answered so too (not with what is ready).
    expect(Date.now() - t0).toBeLessThan(8_000);
    for (const a of answers) expect(a?.error).toMatchObject({ code: -32603, message: expect.stringContaining('the hub is shutting down') });
    expect(await exited).toBe(0);
    const rows = await queryRows(join(dir, 'ledger.db'), {});
    expect(rows.filter((r) => ['tools/list', 'server/discover', 'initialize'].includes(r.method as string)).map((r) => [r.method, r.outcome]).sort()).toEqual([
      ['initialize', 'unavailable'],
      ['server/discover', 'unavailable'],
      ['tools/list', 'unavailable'],
    ]);
  }, 30_000);

  // It waited for its server's restart up to the retry budget (here 20 s, as the drain time),
  // holding the drain, and was then told the connection was lost.
  it('a call waiting between retries for its server to restart is answered at once that the hub is stopping, and that it may have run', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-term-retry-'));
    const hold = join(dir, 'hold');
    const crashy = nodeServer(`${QUIRKS}/crash-mid-call.mjs`, [], { QUIRK_CRASH_ONCE: join(dir, 'c.once') });
    const c = { ...delayed(crashy, { START_HOLD_FILE: hold }), retry: { budgetMs: 20_000 }, tools: { echo: { annotations: { idempotentHint: true } } } };
    const hub = await start(t, { listen: { drainTimeoutMs: 20_000 }, servers: { c } }, { dir });
    await waitForState(hub.url, 'c', ['ready']);
    // Its next process waits while this file is there: the call's retry waits for it.
    writeFileSync(hold, '');
    const call = callTool(hub.url, 'c__echo', {});
    await waitUntil('the retry waiting', async () => hub.logs.some((l) => l.includes('sending the request again')));
    const t0 = Date.now();
    const exited = hub.stop('SIGTERM');
    const a = await call;
    expect(Date.now() - t0).toBeLessThan(8_000);
    expect(JSON.stringify(a)).toMatch(/the hub is shutting down.*may have been carried out/);
    rmSync(hold, { force: true });
    expect(await exited).toBe(0);
    const [row] = await rowsFor(join(dir, 'ledger.db'), 'c__echo');
    expect(row).toMatchObject({ outcome: 'unavailable', errorMessage: expect.stringContaining('the hub is shutting down') });
  }, 30_000);
});

describe.concurrent('hub SIGTERM, a call in flight past the drain deadline', () => {
  // It reached its principal's own connection (processPerPrincipal) once the stop had closed them
  // all: a process was started again then, that nothing closed but the exit watchdog, after the exit.
  it("opens no principal's own connection once the upstreams are closing: the call is answered, and no process is started", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-term-own-'));
    const pids = join(dir, 'pids');
    const hold = join(dir, 'hold');
    const held = join(dir, 'held');
    // Holds each call (before it is routed to a connection) while the hold file is there; says so in `held`.
    writeFileSync(
      join(dir, 'hold.mjs'),
      `import { existsSync, writeFileSync } from 'node:fs';\nexport default { name: 'hold', async beforeCall() { writeFileSync(${JSON.stringify(held)}, ''); while (existsSync(${JSON.stringify(hold)})) await new Promise((r) => setTimeout(r, 20)); } };\n`,
    );
    const KEY = 'sy_alice-stop-own-connection-key-0000000000000000';
    const hub = await start(t, {
      listen: { drainTimeoutMs: 100 },
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(KEY) }] },
      plugins: { paths: ['./hold.mjs'] },
      servers: { own: { ...nodeServer('test/fixtures/faults/stdio-pipes.mjs', [], { FAULT_LOG: pids }), processPerPrincipal: true } },
    }, { dir });
    const started = (): string[] => readFileSync(pids, 'utf8').split('\n').filter(Boolean);
    await waitUntil('the server started', async () => hub.logs.some((l) => l.includes('"server":"own"') && l.includes('"state":"ready"')));
    expect(started()).toHaveLength(1);
    writeFileSync(hold, '');
    const call = modernCall(hub.url, 'own-late', 'tools/call', { name: 'own__echo', arguments: {} }, { headers: { authorization: `Bearer ${KEY}` } });
    await waitUntil('the call held', async () => existsSync(held));
    // The server's process, and alice's own (started to route her call, by her list).
    const before = started();
    const exited = hub.stop('SIGTERM');
    // The stop is closing the upstreams (the server's own closed): the call goes on from there.
    await waitUntil('the upstreams closing', async () => hub.logs.some((l) => l.includes('"server":"own"') && l.includes('"state":"stopped"')));
    rmSync(hold);
    const a = await call;
    // As a call the closing upstream fails: its server closed under it.
    expect(text(a)).toBe('Tool own__echo is unavailable: server "own" is stopped');
    expect(await exited).toBe(0);
    // The stop closed alice's process too: none was started again for the call.
    expect(started()).toEqual(before);
    const [row] = await rowsFor(join(dir, 'ledger.db'), 'own__echo');
    expect(row.outcome).toBe('unavailable');
  }, 30_000);
});

describe.concurrent('a reload that restarts a processPerPrincipal server while a call is on its way', () => {
  // The call was routed to the server's old handle, and reached its principal's own connection
  // only after the reload had the pool forget it: a process was started from the old config, kept
  // in the pool under the server's name (closed only when idle), and the principal's next calls,
  // on the new config, went to it.
  it("starts no process from the old config for it: the call is answered unavailable, and the principal's next call gets a process of the new one", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-reload-own-'));
    const oldPids = join(dir, 'old-pids');
    const newPids = join(dir, 'new-pids');
    const hold = join(dir, 'hold');
    const held = join(dir, 'held');
    // Holds each call (routed, before it is given a connection) while the hold file is there; says so in `held`.
    writeFileSync(
      join(dir, 'hold.mjs'),
      `import { existsSync, writeFileSync } from 'node:fs';\nexport default { name: 'hold', async beforeCall() { if (!existsSync(${JSON.stringify(hold)})) return; writeFileSync(${JSON.stringify(held)}, ''); while (existsSync(${JSON.stringify(hold)})) await new Promise((r) => setTimeout(r, 20)); } };\n`,
    );
    const KEY = 'sy_alice-reload-own-connection-key-00000000000000';
    const hub = await start(t, {
      listen: { drainTimeoutMs: 100 },
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(KEY) }] },
      plugins: { paths: ['./hold.mjs'] },
      servers: { own: { ...nodeServer('test/fixtures/faults/stdio-pipes.mjs', [], { FAULT_LOG: oldPids }), processPerPrincipal: true } },
    }, { dir });
    const started = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);
    const call = (id: string) => modernCall(hub.url, id, 'tools/call', { name: 'own__echo', arguments: {} }, { headers: { authorization: `Bearer ${KEY}` } });
    await waitUntil('the server started', async () => hub.logs.some((l) => l.includes('"server":"own"') && l.includes('"state":"ready"')));
    // The server's process and alice's own.
    expect(text(await call('own-first'))).toBe('{}');
    expect(started(oldPids)).toHaveLength(2);
    writeFileSync(hold, '');
    const late = call('own-late');
    await waitUntil('the call held', async () => existsSync(held));
    // A connection setting changed (where its processes write their pids): the server restarts.
    rewrite(hub.configFile, (c) => {
      c.servers.own = { ...c.servers.own, env: { FAULT_LOG: newPids } };
    });
    await waitUntil('the reload', async () => hub.logs.some((l) => l.includes('"restarted":["own"]')));
    rmSync(hold);
    // Its server replaced since it was routed: nothing was sent, and it says so.
    expect(text(await late)).toBe('Tool own__echo is unavailable: server "own" is replaced: restarted, reconfigured or removed after this request was routed; not sent, send it again');
    expect(started(oldPids)).toHaveLength(2);
    // Once the new server is up, alice's next call starts her own process of the new config.
    let n = 0;
    await waitUntil('a call answered', async () => text(await call(`own-next${++n}`)) === '{}');
    expect(started(newPids)).toHaveLength(2);
    expect(started(oldPids)).toHaveLength(2);
  }, 30_000);
});

describe.concurrent('hub SIGTERM, requests on connections accepted before it', () => {
  /** A whole modern tools/call as raw HTTP/1.1. */
  const rawCall = (port: number, id: string, name: string, args: Json): string => {
    const body = JSON.stringify(modernBody(id, 'tools/call', { name, arguments: args }));
    const head = Object.entries(modernHeaders('tools/call', name)).map(([k, v]) => `${k}: ${v}\r\n`).join('');
    return `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n${head}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };

  // The drain closed every connection not serving a request at its start: one the client had
  // just opened, one whose request was half sent, and a request pipelined behind a call all
  // got a cut connection, no answer and no row.
  it('are answered (refused: the hub is shutting down), each with a row, and the connection then closes', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-term-unread-'));
    const hub = await start(t, { servers: { a: nodeServer(SDK1) } }, { dir });
    await waitForState(hub.url, 'a', ['ready']);
    const fresh = rawClient(hub.port);
    const half = rawClient(hub.port);
    const behind = rawClient(hub.port);
    const halfCall = rawCall(hub.port, 'half', 'a__echo', { text: 'half' });
    half.send(halfCall.slice(0, 80));
    behind.send(rawCall(hub.port, 'first', 'a__slow', { ms: 1500 }) + rawCall(hub.port, 'behind', 'a__echo', { text: 'behind' }));
    await new Promise<void>((r) => (fresh.socket.connecting ? fresh.socket.once('connect', () => r()) : r()));
    await waitUntil('the call in flight', async () => (await serverHealth(hub.url, 'a')).inFlight === 1);
    const exited = hub.stop('SIGTERM');
    await waitUntil('the hub draining', async () => hub.logs.some((l) => l.includes('draining calls in flight')));
    fresh.send(rawCall(hub.port, 'fresh', 'a__echo', { text: 'fresh' }));
    half.send(halfCall.slice(80));
    for (const [c, n] of [[fresh, 1], [half, 1], [behind, 2]] as const) {
      const answers = await c.waitFor(n, 10_000);
      expect(answers.at(-1)!.body).toContain('shutting down');
      expect(answers.at(-1)!.headers.connection).toBe('close');
      await c.waitClosed();
    }
    expect(behind.responses()[0]!.body).toContain('slept 1500');
    expect(await exited).toBe(0);
    const rows = await queryRows(join(dir, 'ledger.db'), { method: 'tools/call' });
    expect(rows.map((r) => [r.requestId, r.outcome]).sort()).toEqual([['behind', 'unavailable'], ['first', 'ok'], ['fresh', 'unavailable'], ['half', 'unavailable']]);
  }, 30_000);
});

describe.concurrent('hot reload', () => {
  it('adds, removes and restarts servers while a call runs on another; rejects an invalid config', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-reload-'));
    const hub = await start(t, { servers: { a: nodeServer(SDK1), b: nodeServer(SDK1), c: nodeServer(SDK2) } }, { dir });
    await Promise.all(['a', 'b', 'c'].map((id) => waitForState(hub.url, id, ['ready'])));
    expect(toolNames(await modernCall(hub.url, 'l0', 'tools/list'))).toEqual(expect.arrayContaining(['a__echo', 'b__echo', 'c__echo']));
    const aBefore = await serverHealth(hub.url, 'a');
    const cBefore = await serverHealth(hub.url, 'c');
    const inFlight = callTool(hub.url, 'a__slow', { ms: 2500 });
    const bCall = callTool(hub.url, 'b__slow', { ms: 400 });
    await sleep(200);

    rewrite(hub.configFile, (c) => {
      delete c.servers.b;
      c.servers.c = { ...c.servers.c, env: { SERVER_NAME: 'c-renamed' } };
      c.servers.d = nodeServer(SDK2);
    });
    await waitUntil('reload logged', async () => hub.logs.some((l) => l.includes('config reloaded')));
    const line = JSON.parse(hub.logs.find((l) => l.includes('config reloaded'))!) as Record<string, string[]>;
    expect(line.added).toEqual(['d']);
    expect(line.removed).toEqual(['b']);
    expect(line.restarted).toEqual(['c']);
    await waitForState(hub.url, 'd', ['ready']);
    await waitForState(hub.url, 'c', ['ready']);
    const names = toolNames(await modernCall(hub.url, 'l1', 'tools/list'));
    expect(names).toEqual(expect.arrayContaining(['a__echo', 'c__echo', 'd__echo']));
    expect(names.some((n) => n.startsWith('b__'))).toBe(false);

    // The call on the untouched server finished normally; so did the removed server's own call.
    const a = await inFlight;
    expect(text(a)).toBe('slept 2500');
    expect(text(await bCall)).toBe('slept 400');
    const aAfter = await serverHealth(hub.url, 'a');
    expect(aAfter.since).toBe(aBefore.since);
    expect(aAfter.restarts).toBe(0);
    expect((await serverHealth(hub.url, 'c')).since).not.toBe(cBefore.since);
    expect(text(await callTool(hub.url, 'd__echo', { text: 'new' }))).toBe('echo:new');
    const gone = await callTool(hub.url, 'b__echo', { text: 'x' });
    expect(gone.body?.error?.message).toMatch(/Unknown tool/);

    // An invalid config is rejected with a clear line; the running one stays.
    const valid = readFileSync(hub.configFile, 'utf8');
    writeFileSync(hub.configFile, JSON.stringify({ servers: { x: { command: 'node', url: 'http://127.0.0.1:1/mcp' } } }));
    await waitUntil('rejection logged', async () => hub.logs.some((l) => l.includes('config reload rejected')));
    const rejected = JSON.parse(hub.logs.find((l) => l.includes('config reload rejected'))!) as { problems: string[] };
    expect(rejected.problems).toEqual(['servers.x: must have exactly one of "command" or "url"']);
    writeFileSync(hub.configFile, '{ "servers": ');
    await waitUntil('second rejection', async () => hub.logs.filter((l) => l.includes('config reload rejected')).length >= 2);
    expect(toolNames(await modernCall(hub.url, 'l2', 'tools/list'))).toEqual(expect.arrayContaining(['a__echo', 'c__echo', 'd__echo']));
    writeFileSync(hub.configFile, valid);
    expect(text(await callTool(hub.url, 'a__echo', { text: 'still' }))).toBe('echo:still');
  }, 60_000);

  it('swaps API keys in: a removed key stops working at once (the last one too), an added one works', async (t) => {
    const OLD = 'sy_old-reload-key-0123456789abcdefghijklmnopqrstuvw';
    const NEW = 'sy_new-reload-key-0123456789abcdefghijklmnopqrstuvw';
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-keys-'));
    const hub = await start(t, { auth: { apiKeys: [{ principal: 'old', sha256: sha256Hex(OLD) }] }, servers: { a: nodeServer(SDK1) } }, { dir });
    let n = 0;
    const list = async (key: string) => (await post(hub.url, modernBody(++n, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}` })).status;
    await waitUntil('old key accepted', async () => ((await list(OLD)) === 200 ? true : undefined));
    expect(await list(NEW)).toBe(401);

    rewrite(hub.configFile, (c) => {
      c.auth = { apiKeys: [{ principal: 'new', sha256: sha256Hex(NEW) }] };
    });
    await waitUntil('keys replaced', async () => hub.logs.some((l) => l.includes('API keys replaced')) || undefined);
    expect(await list(OLD)).toBe(401);
    expect(await list(NEW)).toBe(200);
    expect(hub.logs.some((l) => l.includes('change only on a restart'))).toBe(false);
    const replaced = JSON.parse(hub.logs.find((l) => l.includes('API keys replaced'))!) as { principals: string[] };
    expect(replaced.principals).toEqual(['new']);

    // Removing the last key revokes it too: the running hub then refuses everyone until a
    // restart turns authentication off.
    rewrite(hub.configFile, (c) => {
      delete c.auth;
    });
    await waitUntil('last key gone', async () => hub.logs.some((l) => l.includes('the last API key is gone')) || undefined);
    expect(await list(NEW)).toBe(401);
    const anonymous = await post(hub.url, modernBody(++n, 'tools/list'), modernHeaders('tools/list'));
    expect(anonymous.status).toBe(401);
    expect(hub.logs.some((l) => l.includes('change only on a restart'))).toBe(false);
    // And a key added back works again without a restart.
    rewrite(hub.configFile, (c) => {
      c.auth = { apiKeys: [{ principal: 'new', sha256: sha256Hex(NEW) }] };
    });
    await waitUntil('key back', async () => ((await list(NEW)) === 200 ? true : undefined));
    expect(hub.logs.join('\n')).not.toMatch(/sy_(old|new)-reload-key/);
  }, 30_000);

  it("ends what a revoked key opened: its legacy session's GET stream, its listen stream, and the live feed", async (t) => {
    const OLD = 'sy_old-revoke-key-0123456789abcdefghijklmnopqrstuvw';
    const NEW = 'sy_new-revoke-key-0123456789abcdefghijklmnopqrstuvw';
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-revoke-'));
    const hub = await start(t, { auth: { apiKeys: [{ principal: 'old', sha256: sha256Hex(OLD), scopes: ['switchyard:admin'] }] }, servers: { a: nodeServer(SDK1) } }, { dir });
    const auth = { authorization: `Bearer ${OLD}` };
    const legacy = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...auth };
    const init = await post(hub.url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'revoked', version: '1' } } }, legacy);
    const sid = init.headers.get('mcp-session-id')!;
    expect(sid).toBeTruthy();
    const session = { ...legacy, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, session);
    const stream = await fetch(hub.url, { headers: { ...session, accept: 'text/event-stream' } });
    expect(stream.status).toBe(200);
    const streamEnded = (async () => {
      const reader = stream.body!.getReader();
      while (!(await reader.read().catch(() => ({ done: true }))).done);
      return true;
    })();
    const ws = new WebSocket(hub.url.replace('http', 'ws').replace(/\/mcp$/, '/admin/events'), { headers: auth });
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    const feedClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    // A modern listen stream: nothing on it says which key opened it either, but it has a principal.
    const listen = await fetch(hub.url, {
      method: 'POST',
      headers: { ...modernHeaders('subscriptions/listen'), ...auth },
      body: JSON.stringify(modernBody('l1', 'subscriptions/listen', { notifications: { toolsListChanged: true } })),
    });
    expect(listen.status).toBe(200);
    const listenEnded = (async () => {
      const reader = listen.body!.getReader();
      while (!(await reader.read().catch(() => ({ done: true }))).done);
      return true;
    })();
    // A live-feed ticket the old key asked for and has not used yet.
    const ticket = (await (await fetch(new URL('/admin/ticket', hub.url), { method: 'POST', headers: auth })).json()) as { ticket: string };

    rewrite(hub.configFile, (c) => {
      c.auth = { apiKeys: [{ principal: 'new', sha256: sha256Hex(NEW), scopes: ['switchyard:admin'] }] };
    });
    const within = <T>(p: Promise<T>) => Promise.race([p, sleep(5_000).then(() => 'still open' as const)]);
    expect(await within(feedClosed)).toBe(4001);
    expect(await within(streamEnded)).toBe(true);
    expect(await within(listenEnded)).toBe(true);
    // The session is gone, not merely refused: the new key cannot use it either.
    const reuse = await post(hub.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { ...session, authorization: `Bearer ${NEW}` });
    expect(reuse.status).toBe(404);
    // Nor does the ticket open the live feed any more.
    const late = new WebSocket(hub.url.replace('http', 'ws').replace(/\/mcp$/, `/admin/events?ticket=${ticket.ticket}`));
    const refused = await new Promise<number | string>((resolve) => {
      late.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      late.once('open', () => resolve('opened'));
      late.once('error', () => resolve('error'));
    });
    late.terminate();
    expect(refused).toBe(401);
  }, 30_000);

  it('a key rotated for the same principal ends what the old key opened, and only that', async (t) => {
    const OLD = 'sy_old-rotate-key-0123456789abcdefghijklmnopqrstuvw';
    const NEW = 'sy_new-rotate-key-0123456789abcdefghijklmnopqrstuvw';
    const OTHER = 'sy_other-rotate-key-0123456789abcdefghijklmnopqrstu';
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-rotate-'));
    const keys = (...ks: string[]) => ks.map((k) => ({ principal: 'alice', sha256: sha256Hex(k) }));
    const hub = await start(t, { auth: { apiKeys: keys(OLD, OTHER) }, servers: { a: nodeServer(SDK1) } }, { dir });
    // What each key opens: a legacy session with its GET stream, and a modern listen stream.
    const open = async (key: string) => {
      const legacy = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${key}` };
      const init = await post(hub.url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'rotated', version: '1' } } }, legacy);
      const session = { ...legacy, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
      await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, session);
      const get = await fetch(hub.url, { headers: { ...session, accept: 'text/event-stream' } });
      const listen = await fetch(hub.url, {
        method: 'POST',
        headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${key}` },
        body: JSON.stringify(modernBody('l1', 'subscriptions/listen', { notifications: { toolsListChanged: true } })),
      });
      expect([get.status, listen.status]).toEqual([200, 200]);
      const ended = (r: Response) =>
        (async () => {
          const reader = r.body!.getReader();
          while (!(await reader.read().catch(() => ({ done: true }))).done);
          return 'ended' as const;
        })();
      return { session, get: ended(get), listen: ended(listen) };
    };
    const old = await open(OLD);
    const other = await open(OTHER);
    // OLD is replaced by NEW; alice keeps a key all along (OTHER).
    rewrite(hub.configFile, (c) => {
      c.auth = { apiKeys: keys(NEW, OTHER) };
    });
    const within = <T>(p: Promise<T>, ms: number) => Promise.race([p, sleep(ms).then(() => 'open' as const)]);
    expect(await within(old.get, 5_000)).toBe('ended');
    expect(await within(old.listen, 5_000)).toBe('ended');
    const reuse = await post(hub.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { ...old.session, authorization: `Bearer ${NEW}` });
    expect(reuse.status).toBe(404);
    // What the key that stayed opened is untouched.
    expect(await within(other.get, 300)).toBe('open');
    expect(await within(other.listen, 300)).toBe('open');
    const still = await post(hub.url, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, other.session);
    expect(still.status).toBe(200);
  }, 30_000);

  it('a GET stream opened with another key than its session ends when that key is given to another principal', async (t) => {
    const FIRST = 'sy_first-moved-key-0123456789abcdefghijklmnopqrstuv';
    const MOVED = 'sy_moved-moved-key-0123456789abcdefghijklmnopqrstuv';
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-moved-'));
    const hub = await start(t, 
      { auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(FIRST) }, { principal: 'alice', sha256: sha256Hex(MOVED) }] }, servers: { a: nodeServer(SDK1) } },
      { dir },
    );
    const legacy = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${FIRST}` };
    const init = await post(hub.url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'moved', version: '1' } } }, legacy);
    const session = { ...legacy, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, session);
    // The session was opened with FIRST, its stream with MOVED.
    const get = await fetch(hub.url, { headers: { ...session, authorization: `Bearer ${MOVED}`, accept: 'text/event-stream' } });
    expect(get.status).toBe(200);
    const ended = (async () => {
      const reader = get.body!.getReader();
      while (!(await reader.read().catch(() => ({ done: true }))).done);
      return 'ended' as const;
    })();
    // MOVED now belongs to bob: what it opened as alice's must end; alice keeps FIRST.
    rewrite(hub.configFile, (c) => {
      c.auth = { apiKeys: [{ principal: 'alice', sha256: sha256Hex(FIRST) }, { principal: 'bob', sha256: sha256Hex(MOVED) }] };
    });
    expect(await Promise.race([ended, sleep(5_000).then(() => 'open' as const)])).toBe('ended');
  }, 30_000);

  it("a reload that shortens a server's timeout makes the new limit the server's own: its timeouts open the circuit", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-retime-'));
    const f = await startFaultHttp(join(dir, 'f.log'));
    try {
      const hub = await start(t, { servers: { f: { url: f.url, timeoutMs: 60_000, retry: { maxAttempts: 1 }, circuitBreaker: { failures: 2, cooldownMs: 60_000 } } } }, { dir });
      await waitForState(hub.url, 'f', ['ready']);
      rewrite(hub.configFile, (c) => {
        c.servers.f!.timeoutMs = 800;
      });
      await waitUntil('reloaded', async () => hub.logs.some((l) => l.includes('config reloaded') && l.includes('"updated":["f"]')) || undefined);
      for (let i = 0; i < 2; i++) expect(text(await callTool(hub.url, 'f__hang'))).toMatch(/did not answer within 800 ms/);
      // Two of the server's own timeouts: the circuit is open, and the next call fails at once.
      const t0 = Date.now();
      expect(text(await callTool(hub.url, 'f__hang'))).toContain('circuit open after 2 consecutive failures');
      // The message is the breaker's (a call that reached the server would time out instead);
      // the bound only rules out a wait as long as a timeout.
      expect(Date.now() - t0).toBeLessThan(5_000);
    } finally {
      await f.stop();
    }
  }, 30_000);

  it('with --no-watch, a changed file waits for SIGHUP', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-hup-'));
    const hub = await start(t, { servers: { a: nodeServer(SDK1) } }, { dir, args: ['--no-watch'] });
    await waitForState(hub.url, 'a', ['ready']);
    rewrite(hub.configFile, (c) => {
      c.servers.e = nodeServer(SDK2);
    });
    await sleep(1_000);
    expect(hub.logs.some((l) => l.includes('config reloaded'))).toBe(false);
    hub.proc.kill('SIGHUP');
    await waitUntil('reload on SIGHUP', async () => hub.logs.some((l) => l.includes('config reloaded')));
    await waitForState(hub.url, 'e', ['ready']);
    expect(text(await callTool(hub.url, 'e__echo', { text: 'hup' }))).toBe('echo:hup');
  }, 30_000);
});
