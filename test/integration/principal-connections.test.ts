/**
 * Each principal's own connection to a legacy HTTP upstream (authentication on) is held to what
 * the server's connection is held to: its calls take their slots from the server's
 * maxConcurrent / maxQueue, and a reload that restarts the server, or `servers restart`, lets
 * its calls in flight finish before it is closed. A stdio server with processPerPrincipal gives
 * each principal a process, which holds that principal's resource subscriptions too. The real
 * built hub, with API keys, over loopback HTTP to the http-faults fixture.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { metricValue } from '../helpers/prometheus.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { startFaultHttp, text, type FaultHttp } from './faults-helpers.js';
import { modernCall, type Answer } from './ledger-helpers.js';
import { heardSoFar, META_CAPS, modernBody, modernHeaders, modernMeta, post, type Json } from '../helpers/wire.js';
import { MODERN_FIXTURE, USER_CAPABILITIES } from '../fixtures/translation/peers.js';

const KEYS = {
  alice: 'sy_alice-own-connection-key-000000000000000000000',
  bob: 'sy_bob-own-connection-key-00000000000000000000000',
  ops: 'sy_ops-own-connection-admin-key-0000000000000000',
};

let fault: FaultHttp;
let hub: HubProcess;
let n = 0;
/** The pids of the `own` stdio server's processes, one a line, as each starts. */
const pids = join(process.env.TMPDIR ?? '/tmp', `own-conn-pids-${process.pid}.log`);

beforeAll(async () => {
  rmSync(pids, { force: true });
  fault = await startFaultHttp(join(process.env.TMPDIR ?? '/tmp', `own-conn-${process.pid}.log`));
  hub = await startHub(
    {
      auth: {
        apiKeys: [
          { principal: 'alice', sha256: sha256Hex(KEYS.alice) },
          { principal: 'bob', sha256: sha256Hex(KEYS.bob) },
          { principal: 'ops', sha256: sha256Hex(KEYS.ops), scopes: ['switchyard:admin'] },
        ],
      },
      servers: {
        h: { url: fault.url, maxConcurrent: 1, maxQueue: 0 },
        own: { ...nodeServer('test/fixtures/faults/stdio-pipes.mjs', [], { FAULT_LOG: pids }), processPerPrincipal: true },
        // Each principal's own process is health-checked like the server's (at the interval a
        // reload sets: the test turns it on): one that hangs is restarted.
        stuck: { ...nodeServer('test/fixtures/faults/stdio-faults.mjs', []), processPerPrincipal: true, timeoutMs: 800, healthCheckMs: 0 },
        mod: { ...nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { DOC_URI: 'mod://doc', TOOLS: JSON.stringify([{ name: 'touch', inputSchema: { type: 'object' } }]) }), processPerPrincipal: true },
        // A modern server whose listen stream never watches its one resource; its exit tool crashes the process.
        out: { ...nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { DOC_URI: 'out://doc', LISTEN_LEAVES_OUT: 'out://doc', TOOLS: JSON.stringify([{ name: 'exit', inputSchema: { type: 'object' } }]) }), processPerPrincipal: true },
        // A modern server whose tools ask the user (MRTR input_required).
        ask: { ...nodeServer(MODERN_FIXTURE, [], { SERVER_NAME: 'ask' }), processPerPrincipal: true },
      },
    },
    { args: ['--no-watch'] },
  );
  await waitForReadyWith(hub.url, ['h', 'own', 'mod', 'stuck', 'out', 'ask'], KEYS.alice);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
  await fault?.stop();
  rmSync(pids, { force: true });
});

function slow(who: keyof typeof KEYS, ms: number): Promise<Answer> {
  return modernCall(hub.url, `own${++n}`, 'tools/call', { name: 'h__slow', arguments: { ms } }, { headers: { authorization: `Bearer ${KEYS[who]}` } });
}

describe('a stdio server with processPerPrincipal', () => {
  it("gives each principal a process of its own, started at its first call and kept for the next", async () => {
    const started = (): string[] => readFileSync(pids, 'utf8').split('\n').filter(Boolean);
    const call = async (who: keyof typeof KEYS, arg: string): Promise<Answer> =>
      modernCall(hub.url, `own${++n}`, 'tools/call', { name: 'own__echo', arguments: { arg } }, { headers: { authorization: `Bearer ${KEYS[who]}` } });
    const main = started();
    expect(main).toHaveLength(1); // the server's own process (its list, its health)
    expect(text(await call('alice', 'a1'))).toContain('a1');
    expect(text(await call('bob', 'b1'))).toContain('b1');
    expect(text(await call('alice', 'a2'))).toContain('a2');
    const all = started();
    expect(all).toHaveLength(3);
    expect(new Set(all).size).toBe(3);
  });

  it("subscribes a principal's resources on its own process: a modern server's update there reaches that principal's listen stream", async () => {
    const ac = new AbortController();
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${KEYS.alice}` },
      body: JSON.stringify(modernBody('l-own', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['mod://doc'] } })),
      signal: ac.signal,
    });
    const heard = heardSoFar(res);
    await expect.poll(() => heard().includes('acknowledged')).toBe(true);
    expect(heard()).toContain('mod://doc'); // honoured
    // The resource changes in alice's process (her call's): it says so on her process's listen stream.
    const touched = await modernCall(hub.url, `own${++n}`, 'tools/call', { name: 'mod__touch', arguments: { uri: 'mod://doc' } }, { headers: { authorization: `Bearer ${KEYS.alice}` } });
    expect(text(touched)).toBe('touched');
    await expect.poll(() => heard().includes('notifications/resources/updated'), { timeout: 3000 }).toBe(true);
    ac.abort();
  });

  it("a legacy client's resources/subscribe while its principal's own process restarts waits for that process, not the server's (ready), and is checked there", async () => {
    const auth = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${KEYS.alice}` };
    const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'subs', version: '1' } } }, auth);
    const h = { ...auth, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
    // Alice's own process, ready, leaves the URI out of what it watches: refused.
    const first = await post(hub.url, { jsonrpc: '2.0', id: 1, method: 'resources/subscribe', params: { uri: 'out://doc' } }, h);
    expect(first.body?.error?.message).toContain('its listen stream leaves it out');
    // It crashes (the server's own process stays ready): restarting when her subscribe comes.
    const crashed = await post(hub.url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'out__exit', arguments: {} } }, h);
    expect(JSON.stringify(crashed.body)).toMatch(/connection lost|exit/i);
    // Answered {} at once, it was never checked against what her restarted process watches.
    const again = await post(hub.url, { jsonrpc: '2.0', id: 3, method: 'resources/subscribe', params: { uri: 'out://doc' } }, h);
    expect(again.body?.error?.message).toContain('its listen stream leaves it out');
    // Her process's restart is counted (by server, summed over principals), apart from the server's own connection's.
    const res = await fetch(new URL('/metrics', hub.url), { headers: { authorization: `Bearer ${KEYS.ops}` } });
    const metrics = await res.text();
    expect(metricValue(metrics, 'switchyard_upstream_principal_restarts_total', { server: 'out' })).toBe(1);
    expect(metricValue(metrics, 'switchyard_upstream_restarts_total', { server: 'out' })).toBe(0);
  });

  // The server's own process ready, the retry waited for nothing: refused at once ("restarting"),
  // the user's answer lost, as it was for the server's own process before back-soon.ts.
  it("a modern client's retry of a round while its principal's own process restarts after a crash waits for that process, and is answered", async () => {
    const name = 'ask__elicit_form';
    const send = async (params: Json): Promise<Json> => {
      const id = `ask${++n}`;
      const r = await post(hub.url, modernBody(id, 'tools/call', params, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), { ...modernHeaders('tools/call', name), authorization: `Bearer ${KEYS.alice}` });
      const m = r.messages.find((x) => x.id === id);
      if (!m) throw new Error(`${r.status} ${r.text}`);
      return m as Json;
    };
    const first = await send({ name, arguments: { who: 'Own' } });
    const state = (first.result as Json | undefined)?.requestState;
    expect(state, JSON.stringify(first)).toMatch(/^sy1\./);
    const spawned = hub.logs.filter((l) => l.includes('"msg":"spawned"')).map((l) => JSON.parse(l) as Json);
    const pid = spawned.filter((l) => l.server === 'ask' && l.principal === 'alice').at(-1)?.pid as number;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid, 'SIGKILL');
    const restarts = async () => metricValue(await (await fetch(new URL('/metrics', hub.url), { headers: { authorization: `Bearer ${KEYS.ops}` } })).text(), 'switchyard_upstream_principal_restarts_total', { server: 'ask' });
    for (const until = Date.now() + 10_000; (await restarts()) < 1; await new Promise((r) => setTimeout(r, 20))) if (Date.now() > until) throw new Error('her process never went down');
    const retry = await send({ name, arguments: { who: 'Own' }, requestState: state, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } });
    expect(retry.result, JSON.stringify(retry)).toMatchObject({ content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });
  });

  it("ends and restarts a principal's own process that stays alive but answers nothing, as the server's own (at the healthCheckMs a reload set)", async () => {
    const call = (who: keyof typeof KEYS, name: string, args: Record<string, unknown> = {}): Promise<Answer> =>
      modernCall(hub.url, `own${++n}`, 'tools/call', { name, arguments: args }, { headers: { authorization: `Bearer ${KEYS[who]}` } });
    // Bob's process starts before the reload, alice's after it.
    expect(text(await call('bob', 'stuck__echo'))).toBe('{}');
    const config = JSON.parse(readFileSync(hub.configFile, 'utf8'));
    config.servers.stuck.healthCheckMs = 200;
    writeFileSync(hub.configFile, JSON.stringify(config));
    hub.proc.kill('SIGHUP');
    await expect.poll(() => hub.logs.some((l) => l.includes('config reloaded') && l.includes('"stuck"')), { timeout: 10_000 }).toBe(true);
    const deafThenBack = async (who: keyof typeof KEYS): Promise<void> => {
      expect(text(await call(who, 'stuck__deaf'))).toBe('deaf from now on');
      // Its next calls waited out their whole timeout, for good: nothing ever checked that process.
      await expect.poll(async () => text(await call(who, 'stuck__echo', { again: true })), { timeout: 15_000, interval: 300 }).toBe('{"again":true}');
    };
    await Promise.all([deafThenBack('bob'), deafThenBack('alice')]);
  }, 30_000);
});

describe("a principal's own upstream connection", () => {
  it("takes its calls' slots from the server's maxConcurrent: two principals never have more in flight", async () => {
    // Each principal's own connection is made (and its tools listed) first.
    expect(text(await slow('alice', 1))).toBe('slow done');
    expect(text(await slow('bob', 1))).toBe('slow done');
    const first = slow('alice', 1_500);
    await new Promise((r) => setTimeout(r, 300));
    const second = await slow('bob', 1_500);
    expect(second.body?.result?.isError, JSON.stringify(second.body)).toBe(true);
    expect(text(second)).toMatch(/server "h" is busy: 1 requests in flight and 0 waiting/);
    expect(text(await first)).toBe('slow done');
    // The server saw one of them only.
    expect(fault.log().filter((e) => e.name === 'slow' && e.method === 'tools/call')).toHaveLength(3);
  });

  it('a reload that restarts the server lets its calls in flight finish', async () => {
    expect(text(await slow('alice', 1))).toBe('slow done'); // alice's own connection is made
    const inFlight = slow('alice', 2_000);
    await new Promise((r) => setTimeout(r, 500));
    const config = JSON.parse(readFileSync(hub.configFile, 'utf8'));
    config.servers.h.headers = { 'x-generation': '2' }; // a connection setting: the server restarts
    writeFileSync(hub.configFile, JSON.stringify(config));
    hub.proc.kill('SIGHUP');
    await expect.poll(() => hub.logs.some((l) => l.includes('"restarted":["h"]')), { timeout: 10_000 }).toBe(true);
    const answer = await inFlight;
    expect(answer.body?.result?.isError, JSON.stringify(answer.body)).toBeUndefined();
    expect(text(answer)).toBe('slow done');
  });

  it('so does `servers restart`', async () => {
    await waitForReadyWith(hub.url, ['h'], KEYS.bob);
    expect(text(await slow('bob', 1))).toBe('slow done');
    const inFlight = slow('bob', 2_000);
    await new Promise((r) => setTimeout(r, 500));
    const r = await fetch(new URL('/admin/servers/h/restart', hub.url), { method: 'POST', headers: { authorization: `Bearer ${KEYS.ops}` } });
    expect(r.status, await r.text()).toBeLessThan(300);
    const answer = await inFlight;
    expect(answer.body?.result?.isError, JSON.stringify(answer.body)).toBeUndefined();
    expect(text(answer)).toBe('slow done');
  });
});
