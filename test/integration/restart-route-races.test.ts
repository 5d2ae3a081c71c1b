/**
 * Requests whose route waits for a list while `servers restart` (or a reload) replaces their
 * server, through the real hub and real upstream processes: once the restart is accepted, what
 * is routed after it goes to the new process, never to the old one, which drains only the calls
 * it was sent before. The upstream tags its answers with its pid; its first process's lists wait
 * for a gate file, the second's do not.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { firstText, health, modernBody, modernHeaders, modernPost, waitForReady, type Json, type RpcMessage } from '../helpers/wire.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { tmp } from './catalog-helpers.js';
import { holdingPlugin } from '../helpers/hold-plugin.js';
import { inOneTurn, restartRequest } from '../helpers/one-turn.js';
import { HOLD_FROM } from '../../src/turn-end.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const TOOLS = JSON.stringify(['echo', 'hang', 'mutate'].map((name) => ({ name, inputSchema: { type: 'object' } })));

/** A call of `r__hang` (never answered) that keeps the first process draining after the restart, until `signal` aborts it. */
function hangingCall(url: string, signal: AbortSignal): Promise<unknown> {
  return fetch(url, { method: 'POST', headers: modernHeaders('tools/call', 'r__hang'), body: JSON.stringify(modernBody('hang', 'tools/call', { name: 'r__hang', arguments: {} })), signal }).catch(() => undefined);
}

interface Rig {
  hub: HubProcess;
  /** The hub's folder (its config, the plugin, the gate). */
  dir: string;
  gate: string;
  stats: () => Record<string, number>;
  /** The first process's pid, from its answer to an echo. */
  pid1: string;
  /** Ends the hanging call: the first process then drains and closes. */
  release: () => void;
  /** Writes the config with `r`'s environment changed by `extra`: a reload replaces it. */
  reconfigure: (extra: Record<string, string>) => void;
}

let rig: Rig | undefined;
afterEach(async () => {
  rig?.release();
  await rig?.hub.stop();
  rig = undefined;
});

/**
 * A hub with one server `r` whose lists are kept 0 ms (each route that needs one asks the
 * server), a call hanging on its first process, and the gate open. `other`: a second server `o`
 * beside it, never gated.
 */
async function rigged(env: Record<string, string> = {}, plugin?: (dir: string) => string, other = false): Promise<Rig> {
  const dir = tmp();
  if (plugin) writeFileSync(join(dir, 'plugin.mjs'), plugin(dir));
  const gate = join(dir, 'gate');
  const statsFile = join(dir, 'stats.json');
  writeFileSync(gate, '');
  const servers = (extra: Record<string, string>) => ({
    r: nodeServer(MUTABLE, [], {
      ERA: 'modern',
      LIST_TTL_MS: '0',
      TOOLS,
      PID_TAG: '1',
      PROMPTS: '1',
      COMPLETIONS: '1',
      LIST_GATE: gate,
      LIST_GATE_FIRST: '1',
      LIST_GATE_KINDS: 'tools/list,prompts/list,resources/list',
      STATS_FILE: statsFile,
      ...env,
      ...extra,
    }),
    ...(other ? { o: nodeServer(MUTABLE, [], { ERA: 'modern', TOOLS, PID_TAG: '1' }) } : {}),
  });
  const hub = await startHub({ listen: { drainTimeoutMs: 20_000 }, ...(plugin ? { plugins: { paths: ['./plugin.mjs'] } } : {}), servers: servers({}) }, { dir });
  const stats = () => JSON.parse(readFileSync(statsFile, 'utf8')) as Record<string, number>;
  await waitForReady(hub.url, other ? ['r', 'o'] : ['r']);
  const first = String(firstText((await modernPost(hub.url, 'first', 'tools/call', { name: 'r__echo', arguments: { text: 'first' } })).body?.result));
  const pid1 = /^echo:first@(\d+)$/.exec(first)?.[1];
  expect(pid1, first).toBeDefined();
  const cancel = new AbortController();
  void hangingCall(hub.url, cancel.signal);
  await expect.poll(() => stats()['tools/call'], { timeout: 10_000, interval: 20 }).toBe(2);
  return { hub, dir, gate, stats, pid1: pid1!, release: () => cancel.abort(), reconfigure: (extra) => setSection(hub, 'servers', servers(extra)) };
}

/** Has the hub replace `id` (its restart accepted), and waits for the new process to be ready. */
async function restart(hub: HubProcess, id = 'r'): Promise<void> {
  expect((await fetch(new URL(`/admin/servers/${id}/restart`, hub.url), { method: 'POST' })).status).toBe(200);
  await waitForReady(hub.url, [id]);
}

/** The hub's debug lines saying a request of `method` to `server` was routed again (Dispatch.route, hub/dispatch.ts). */
function reroutes(hub: HubProcess, method: string, server: string): number {
  return hub.logs.filter((l) => l.includes('while the request was routed: routed again') && l.includes(`"method":"${method}"`) && l.includes(`"server":"${server}"`)).length;
}

/**
 * Sends `request` once the first process holds its lists, waits until the request's route asks
 * for one (`list` counted once more), has `r` replaced, then lets the first process answer.
 */
async function acrossRestart(r: Rig, list: string, request: () => Promise<Json | undefined>, replace = () => restart(r.hub)): Promise<Json | undefined> {
  rmSync(r.gate);
  const before = r.stats()[list] ?? 0;
  const pending = request();
  await expect.poll(() => r.stats()[list] ?? 0, { timeout: 10_000, interval: 20 }).toBeGreaterThan(before);
  await replace();
  writeFileSync(r.gate, '');
  return pending;
}

describe('a request routed while its server is replaced', () => {
  it('tools/call: a call whose route waited for the tools list goes to the new process', async () => {
    rig = await rigged();
    const r = rig;
    // Its tools change: the next call is routed by the list fetched again (asked of the server).
    await modernPost(r.hub.url, 'm', 'tools/call', { name: 'r__mutate', arguments: { op: 'add', def: { name: 'extra', inputSchema: { type: 'object' } } } });
    await expect.poll(async () => (await health(r.hub.url)).servers.find((s) => s.id === 'r')?.tools, { timeout: 10_000, interval: 20 }).toBe(4);
    const call = await acrossRestart(r, 'tools/list', async () => (await modernPost(r.hub.url, 'raced', 'tools/call', { name: 'r__echo', arguments: { text: 'raced' } })).body?.result);
    const text = String(firstText(call));
    expect(text).toMatch(/^echo:raced@\d+$/);
    expect(text).not.toBe(`echo:raced@${r.pid1}`);
    expect(reroutes(r.hub, 'tools/call', 'r')).toBe(1);
  });

  it('tools/call: a call whose route waited for its server’s list while another server was restarted is not routed again', async () => {
    rig = await rigged({}, undefined, true);
    const r = rig;
    await modernPost(r.hub.url, 'm', 'tools/call', { name: 'r__mutate', arguments: { op: 'add', def: { name: 'extra', inputSchema: { type: 'object' } } } });
    await expect.poll(async () => (await health(r.hub.url)).servers.find((s) => s.id === 'r')?.tools, { timeout: 10_000, interval: 20 }).toBe(4);
    const call = await acrossRestart(r, 'tools/list', async () => (await modernPost(r.hub.url, 'steady', 'tools/call', { name: 'r__echo', arguments: { text: 'steady' } })).body?.result, () => restart(r.hub, 'o'));
    // Its server was not touched: routed once, by its list, and answered by its process.
    expect(String(firstText(call))).toBe(`echo:steady@${r.pid1}`);
    expect(r.hub.logs.filter((l) => l.includes('routed again'))).toEqual([]);
  });

  it('tools/call across a reload that replaces the server: the new process answers', async () => {
    rig = await rigged();
    const r = rig;
    await modernPost(r.hub.url, 'm', 'tools/call', { name: 'r__mutate', arguments: { op: 'add', def: { name: 'extra', inputSchema: { type: 'object' } } } });
    await expect.poll(async () => (await health(r.hub.url)).servers.find((s) => s.id === 'r')?.tools, { timeout: 10_000, interval: 20 }).toBe(4);
    const reload = async () => {
      r.reconfigure({ TAG: '-reloaded' });
      await loggedTimes(r.hub, 'config reloaded', 1);
      await waitForReady(r.hub.url, ['r']);
    };
    const call = await acrossRestart(r, 'tools/list', async () => (await modernPost(r.hub.url, 'raced', 'tools/call', { name: 'r__echo', arguments: { text: 'raced' } })).body?.result, reload);
    expect(String(firstText(call))).toMatch(/^echo:raced-reloaded@\d+$/);
  });

  it('tools/list: a list built across the restart is the new process’s, not the old one’s', async () => {
    rig = await rigged();
    const r = rig;
    // The first process lists a tool the second will not have.
    await modernPost(r.hub.url, 'm', 'tools/call', { name: 'r__mutate', arguments: { op: 'add', def: { name: 'extra', inputSchema: { type: 'object' } } } });
    await expect.poll(async () => (await health(r.hub.url)).servers.find((s) => s.id === 'r')?.tools, { timeout: 10_000, interval: 20 }).toBe(4);
    const listed = await acrossRestart(r, 'tools/list', async () => (await modernPost(r.hub.url, 'held', 'tools/list')).body?.result);
    const names = ((listed?.tools ?? []) as Json[]).map((t) => t.name);
    expect(names).toContain('r__echo');
    expect(names).not.toContain('r__extra');
    const call = await modernPost(r.hub.url, 'after', 'tools/call', { name: 'r__echo', arguments: { text: 'after' } });
    expect(String(firstText(call.body?.result))).not.toBe(`echo:after@${r.pid1}`);
  });

  it('prompts/get: a get whose route waited for the prompts list goes to the new process', async () => {
    rig = await rigged();
    const r = rig;
    const got = await acrossRestart(r, 'prompts/list', async () => (await modernPost(r.hub.url, 'raced', 'prompts/get', { name: 'r__greet', arguments: { who: 'x' } })).body?.result);
    const text = String(((got?.messages as Json[] | undefined)?.[0]?.content as Json | undefined)?.text);
    expect(text).toMatch(/^greet: \{"who":"x"\}@\d+$/);
    expect(text).not.toMatch(new RegExp(`@${r.pid1}$`));
  });

  it('completion/complete: a completion whose route waited for the prompts list goes to the new process', async () => {
    rig = await rigged();
    const r = rig;
    const got = await acrossRestart(r, 'prompts/list', async () => (await modernPost(r.hub.url, 'raced', 'completion/complete', { ref: { type: 'ref/prompt', name: 'r__greet' }, argument: { name: 'who', value: '' } })).body?.result);
    const values = (got?.completion as Json | undefined)?.values as string[] | undefined;
    expect(values?.[0]).toMatch(/^v@\d+$/);
    expect(values).not.toEqual([`v@${r.pid1}`]);
  });

  it('resources/read: a read whose route waited for the resources list goes to the new process', async () => {
    rig = await rigged();
    const r = rig;
    const got = await acrossRestart(r, 'resources/list', async () => (await modernPost(r.hub.url, 'raced', 'resources/read', { uri: 'mut://doc' })).body?.result);
    const text = String((got?.contents as Json[] | undefined)?.[0]?.text);
    expect(text).toMatch(/^first version@\d+$/);
    expect(text).not.toBe(`first version@${r.pid1}`);
  });

  it('tools/call: a call routed before the restart and held before it is sent (a plugin) is not sent to the old process', async () => {
    // Its beforeCall holds the call whose text is `held` until the file `open` exists, and says so by writing `holding`.
    rig = await rigged({}, holdingPlugin);
    const r = rig;
    const dir = r.dir;
    const pending = modernPost(r.hub.url, 'held', 'tools/call', { name: 'r__echo', arguments: { text: 'held' } });
    await expect.poll(() => existsSync(join(dir, 'holding')), { timeout: 10_000, interval: 20 }).toBe(true);
    await restart(r.hub);
    writeFileSync(join(dir, 'open'), '');
    const result = (await pending).body?.result;
    // Not sent (safe to send again): the old process only drains what it was sent.
    expect(String(firstText(result))).not.toBe(`echo:held@${r.pid1}`);
    expect(result).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/^Tool r__echo is unavailable: server "r" is replaced: .*not sent, send it again$/) }] });
    const again = await modernPost(r.hub.url, 'again', 'tools/call', { name: 'r__echo', arguments: { text: 'again' } });
    expect(String(firstText(again.body?.result))).toMatch(/^echo:again@\d+$/);
    expect(String(firstText(again.body?.result))).not.toBe(`echo:again@${r.pid1}`);
  });
});

/**
 * Has `request`'s route wait for `list` of the first process, which answers it in the turn the hub
 * reads `servers restart` (inOneTurn), the hub as busy as HOLD_FROM rows in flight (calls of
 * r__hang): a row begun then is written at the turn's end, with the others of that turn. So the
 * request is routed to the old process before the restart is read, and its row written after:
 * the window between its route and its sending. Returns its answer.
 */
async function restartAsRowIsWritten(r: Rig, said: string, list: string, request: () => Promise<RpcMessage | undefined>): Promise<RpcMessage | undefined> {
  const busy = new AbortController();
  try {
    const calls = r.stats()['tools/call'] ?? 0;
    for (let i = 0; i < HOLD_FROM; i++) void hangingCall(r.hub.url, busy.signal);
    await expect.poll(() => r.stats()['tools/call'] ?? 0, { timeout: 10_000, interval: 20 }).toBe(calls + HOLD_FROM);
    rmSync(r.gate);
    const lists = r.stats()[list] ?? 0;
    const pending = request();
    await expect.poll(() => r.stats()[list] ?? 0, { timeout: 10_000, interval: 20 }).toBe(lists + 1);
    const answered = () => expect.poll(() => (existsSync(said) ? readFileSync(said, 'utf8') : ''), { timeout: 10_000, interval: 5 }).toContain(list);
    expect(await inOneTurn(r.hub, () => writeFileSync(r.gate, ''), answered, restartRequest('r'))).toBe(200);
    await waitForReady(r.hub.url, ['r']);
    return await pending;
  } finally {
    busy.abort();
  }
}

describe('a request routed before the restart, which is read as its ledger row is written', () => {
  // Not sent to the old process, which drains only what it was sent: answered unavailable,
  // safe to send again (Router.forward's look at the connection once the row is committed).
  const replaced = { code: -32603, message: expect.stringMatching(/^server "r" is replaced: .*not sent, send it again$/) };

  it('prompts/get: answered "replaced", not sent; sent again, the new process answers', async () => {
    const said = join(tmp(), 'said');
    rig = await rigged({ GATE_SAID: said });
    const r = rig;
    const got = await restartAsRowIsWritten(r, said, 'prompts/list', async () => (await modernPost(r.hub.url, 'raced', 'prompts/get', { name: 'r__greet', arguments: { who: 'x' } })).body);
    expect(got).toMatchObject({ error: replaced });
    const again = await modernPost(r.hub.url, 'again', 'prompts/get', { name: 'r__greet', arguments: { who: 'x' } });
    const text = String(((again.body?.result?.messages as Json[] | undefined)?.[0]?.content as Json | undefined)?.text);
    expect(text).toMatch(/^greet: \{"who":"x"\}@\d+$/);
    expect(text).not.toMatch(new RegExp(`@${r.pid1}$`));
  });

  it('resources/read: answered "replaced", not sent; sent again, the new process answers', async () => {
    const said = join(tmp(), 'said');
    rig = await rigged({ GATE_SAID: said });
    const r = rig;
    const got = await restartAsRowIsWritten(r, said, 'resources/list', async () => (await modernPost(r.hub.url, 'raced', 'resources/read', { uri: 'mut://doc' })).body);
    expect(got).toMatchObject({ error: replaced });
    const again = await modernPost(r.hub.url, 'again', 'resources/read', { uri: 'mut://doc' });
    const text = String((again.body?.result?.contents as Json[] | undefined)?.[0]?.text);
    expect(text).toMatch(/^first version@\d+$/);
    expect(text).not.toBe(`first version@${r.pid1}`);
  });

  it('completion/complete: answered "replaced", not sent', async () => {
    const said = join(tmp(), 'said');
    rig = await rigged({ GATE_SAID: said });
    const r = rig;
    const got = await restartAsRowIsWritten(r, said, 'prompts/list', async () => (await modernPost(r.hub.url, 'raced', 'completion/complete', { ref: { type: 'ref/prompt', name: 'r__greet' }, argument: { name: 'who', value: '' } })).body);
    expect(got).toMatchObject({ error: replaced });
  });
});
