/**
 * Requests on a tool group's endpoint (`/mcp/<group>`) routed before a reload hides their target
 * from the group, the reload read as their ledger row is written, through the real hub and a
 * real upstream process: not sent, answered as a request after the reload is (unknown, not
 * found), the row saying so. The upstream answers what the request's route waited for in the
 * turn the hub reads POST /admin/reload (inOneTurn), the hub as busy as HOLD_FROM calls in
 * flight, so that a row begun then is written at the turn's end, after the reload.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernBody, modernHeaders, modernPost, waitForReady, type Json, type RpcMessage } from '../helpers/wire.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { tmp } from './catalog-helpers.js';
import { inOneTurn } from '../helpers/one-turn.js';
import { HOLD_FROM } from '../../src/turn-end.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const TOOLS = JSON.stringify(['echo', 'hang'].map((name) => ({ name, inputSchema: { type: 'object' } })));
const BEFORE = { g: { servers: ['r'] } };
/** Group g as reloaded: r's prompt greet denied (r still shown). */
const GREET_DENIED = { g: { servers: ['r'], deny: ['r__greet'] } };
/** Group g as reloaded: r not shown (its resources with it). */
const R_HIDDEN = { g: { servers: ['elsewhere'] } };
/** Group g removed (another kept, so groups stay on). */
const G_REMOVED = { h: { servers: ['r'] } };
const G_GONE = 'the client session ended while the request was in flight: the group it was opened on (/mcp/g) was removed';
const RELOAD = 'POST /admin/reload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n';

interface Rig {
  hub: HubProcess;
  /** The endpoint of group g. */
  g: string;
  gate: string;
  /** Where r writes the method of each answer the gate held, once it is in the hub's pipe. */
  said: string;
  stats: () => Record<string, number>;
}

let hub: HubProcess | undefined;
/** Ends the calls keepBusy made. */
let busy: AbortController | undefined;
afterEach(async () => {
  busy?.abort();
  await hub?.stop();
  hub = busy = undefined;
});

/** A hub with one server r (`era`) whose answers of `held` wait for the gate file, and group g showing r. */
async function rigged(era: 'modern' | 'legacy', held: string): Promise<Rig> {
  const dir = tmp();
  const gate = join(dir, 'gate');
  const said = join(dir, 'said');
  const statsFile = join(dir, 'stats.json');
  writeFileSync(gate, '');
  // Lists kept 0 ms: a route that needs r's list asks r for it (and waits at the gate).
  const r = nodeServer(MUTABLE, [], { ERA: era, LIST_TTL_MS: '0', TOOLS, PID_TAG: '1', PROMPTS: '1', COMPLETIONS: '1', LIST_GATE: gate, LIST_GATE_KINDS: held, GATE_SAID: said, STATS_FILE: statsFile });
  hub = await startHub({ groups: BEFORE, servers: { r } }, { dir });
  await waitForReady(hub.url, ['r']);
  const stats = () => JSON.parse(readFileSync(statsFile, 'utf8')) as Record<string, number>;
  return { hub, g: hub.url.replace(/\/mcp$/, '/mcp/g'), gate, said, stats };
}

/** HOLD_FROM calls of r__hang in flight on the whole hub's endpoint (never answered), until the test ends. */
async function keepBusy(r: Rig): Promise<void> {
  busy = new AbortController();
  const { signal } = busy;
  const calls = r.stats()['tools/call'] ?? 0;
  for (let i = 0; i < HOLD_FROM; i++) {
    void fetch(r.hub.url, { method: 'POST', headers: modernHeaders('tools/call', 'r__hang'), body: JSON.stringify(modernBody(`hang${i}`, 'tools/call', { name: 'r__hang', arguments: {} })), signal }).catch(() => undefined);
  }
  await expect.poll(() => r.stats()['tools/call'] ?? 0, { timeout: 10_000, interval: 20 }).toBe(calls + HOLD_FROM);
}

/**
 * Once `request` waits for r's answer of `list` (held at the gate), writes `groups` into the
 * config and has the hub read r's answer and POST /admin/reload in one turn. Returns the
 * request's answer.
 */
async function reloadAsRowIsWritten<T>(r: Rig, list: string, groups: unknown, request: () => Promise<T>, waiting?: () => Promise<unknown>): Promise<T> {
  await keepBusy(r);
  rmSync(r.gate);
  const lists = r.stats()[list] ?? 0;
  const pending = request();
  await expect.poll(() => r.stats()[list] ?? 0, { timeout: 10_000, interval: 20 }).toBe(lists + 1);
  await waiting?.();
  const answered = () => expect.poll(() => (existsSync(r.said) ? readFileSync(r.said, 'utf8') : ''), { timeout: 10_000, interval: 5 }).toContain(list);
  // The config is written while the hub is stopped: its file watch then finds it applied already.
  const release = () => {
    setSection(r.hub, 'groups', groups);
    writeFileSync(r.gate, '');
  };
  expect(await inOneTurn(r.hub, release, answered, RELOAD)).toBe(200);
  await loggedTimes(r.hub, 'config reload: groups replaced', 1);
  return pending;
}

/** The rows of `method` on group g: outcome, code and message. */
function rowsOn(hub: HubProcess, method: string): Json[] {
  const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
  try {
    return db.prepare("SELECT outcome, error_code AS code, error_message AS message FROM audit WHERE method = ? AND tool_group = 'g' ORDER BY id").all(method) as Json[];
  } finally {
    db.close();
  }
}

/** The rows of `method` on group g that ended in a JSON-RPC error. */
function refusedRows(hub: HubProcess, method: string): Json[] {
  const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
  try {
    return db.prepare("SELECT outcome, error_code AS code, error_message AS message, server FROM audit WHERE method = ? AND tool_group = 'g' AND outcome = 'rpc_error' ORDER BY id").all(method) as Json[];
  } finally {
    db.close();
  }
}

const body = async (reply: Promise<{ body?: RpcMessage }>): Promise<RpcMessage | undefined> => (await reply).body;

describe('a request through a group, routed before a reload hides its target from the group, the reload read as its row is written', () => {
  it('prompts/get: answered "Unknown prompt" as a later get is, not sent', async () => {
    const r = await rigged('modern', 'prompts/list');
    const get = () => body(modernPost(r.g, 'get', 'prompts/get', { name: 'r__greet', arguments: { who: 'x' } }));
    const gets = r.stats()['prompts/get'] ?? 0;
    const raced = await reloadAsRowIsWritten(r, 'prompts/list', GREET_DENIED, get);
    const later = await get();
    expect(later?.error).toMatchObject({ code: -32602, message: 'Unknown prompt: r__greet' });
    expect(raced?.error).toEqual(later?.error);
    expect(r.stats()['prompts/get'] ?? 0).toBe(gets);
    // The raced get's row (begun with its route, so naming r) and the later one's.
    await expect.poll(() => refusedRows(r.hub, 'prompts/get'), { timeout: 10_000, interval: 50 }).toEqual([
      { outcome: 'rpc_error', code: -32602, message: 'Unknown prompt: r__greet', server: 'r' },
      { outcome: 'rpc_error', code: -32602, message: 'Unknown prompt: r__greet', server: null },
    ]);
  }, 60_000);

  it('completion/complete: answered "Unknown completion reference" as a later one is, not sent', async () => {
    const r = await rigged('modern', 'prompts/list');
    const complete = () => body(modernPost(r.g, 'c', 'completion/complete', { ref: { type: 'ref/prompt', name: 'r__greet' }, argument: { name: 'who', value: '' } }));
    const completions = r.stats()['completion/complete'] ?? 0;
    const raced = await reloadAsRowIsWritten(r, 'prompts/list', GREET_DENIED, complete);
    const later = await complete();
    expect(later?.error).toMatchObject({ code: -32602, message: 'Unknown completion reference: r__greet' });
    expect(raced?.error).toEqual(later?.error);
    expect(r.stats()['completion/complete'] ?? 0).toBe(completions);
    await expect.poll(() => refusedRows(r.hub, 'completion/complete').map((x) => x.server), { timeout: 10_000, interval: 50 }).toEqual(['r', null]);
  }, 60_000);

  // A resource not found is -32002 to a legacy client, -32602 naming the URI to a modern one.
  it.each([
    ['modern', -32602],
    ['legacy', -32002],
  ] as const)('resources/read (a %s client): answered not found as a later read is, not sent', async (era, code) => {
    const r = await rigged('modern', 'resources/list');
    const s = era === 'legacy' ? await legacySession(r.g) : undefined;
    let n = 0;
    const read = async () => (s ? (await s.request(++n, 'resources/read', { uri: 'mut://doc' })).body : body(modernPost(r.g, 'read', 'resources/read', { uri: 'mut://doc' })));
    // The hub's first read: its route asks r for its resources list (a later one goes by the list built then).
    const reads = r.stats()['resources/read'] ?? 0;
    const raced = await reloadAsRowIsWritten(r, 'resources/list', R_HIDDEN, read);
    const later = await read();
    expect(later?.error).toMatchObject({ code, message: 'Resource not found: mut://doc', data: { uri: 'mut://doc' } });
    expect(raced?.error).toEqual(later?.error);
    expect(r.stats()['resources/read'] ?? 0).toBe(reads);
    // The whole hub still reads it.
    expect(String(((await body(modernPost(r.hub.url, 'all', 'resources/read', { uri: 'mut://doc' })))?.result?.contents as Json[] | undefined)?.[0]?.text)).toMatch(/^first version@\d+$/);
    await expect.poll(() => refusedRows(r.hub, 'resources/read').map((x) => [x.code, x.server]), { timeout: 10_000, interval: 50 }).toEqual([
      [code, 'r'],
      [code, null],
    ]);
  }, 60_000);

  it('resources/subscribe (legacy): made after an unsubscribe of its URI was answered, answered not found as a later one is, not sent', async () => {
    // r holds its answers to resources/unsubscribe: a subscribe of the same URI waits for one
    // on its way (Subscriptions.make), and is made (its row begun) in the turn it is answered.
    const r = await rigged('legacy', 'resources/unsubscribe');
    const s = await legacySession(r.g);
    const subscribe = async (id: number) => (await s.request(id, 'resources/subscribe', { uri: 'mut://doc' })).body;
    expect((await subscribe(1))?.result).toEqual({});
    const subscribes = r.stats()['resources/subscribe'];
    expect(subscribes).toBe(1);
    const waitsLines = () => r.hub.logs.filter((l) => l.includes('a subscribe waits for the unsubscribe of its URI on its way there')).length;
    const raced = await reloadAsRowIsWritten(
      r,
      'resources/unsubscribe',
      R_HIDDEN,
      async () => {
        const unsubscribed = s.request(2, 'resources/unsubscribe', { uri: 'mut://doc' });
        // The subscribe once the unsubscribe is sent upstream (and held there).
        await expect.poll(() => r.stats()['resources/unsubscribe'] ?? 0, { timeout: 10_000, interval: 20 }).toBe(1);
        const subscribed = subscribe(3);
        return { unsubscribed, subscribed };
      },
      () => expect.poll(waitsLines, { timeout: 10_000, interval: 20 }).toBe(1),
    );
    expect((await raced.unsubscribed).body?.result).toEqual({});
    const later = await subscribe(4);
    expect(later?.error).toMatchObject({ code: -32002, message: 'Resource not found: mut://doc' });
    expect((await raced.subscribed)?.error).toEqual(later?.error);
    expect(r.stats()['resources/subscribe']).toBe(subscribes);
    await expect.poll(() => refusedRows(r.hub, 'resources/subscribe').map((x) => [x.code, x.server]), { timeout: 10_000, interval: 50 }).toEqual([
      [-32002, 'r'],
      [-32002, null],
    ]);
  }, 60_000);
});

// Its legacy session ended by the same reload (its group removed): its client is answered that
// session's 404, and the row says that, as for a held tools/call, not "unknown".
describe("a legacy request through a group a reload removed, routed before it, the reload read as its row is written", () => {
  const gone = async (reply: Promise<{ status: number; body?: RpcMessage }>) => {
    const r = await reply;
    return { status: r.status, error: r.body?.error };
  };
  const told = { status: 404, error: { code: -32001, message: `Session not found: ${G_GONE}` } };

  it('prompts/get: its client gets the session\'s 404, its row cancelled saying why; not sent', async () => {
    const r = await rigged('modern', 'prompts/list');
    const s = await legacySession(r.g);
    const gets = r.stats()['prompts/get'] ?? 0;
    const raced = await reloadAsRowIsWritten(r, 'prompts/list', G_REMOVED, () => gone(s.request(1, 'prompts/get', { name: 'r__greet', arguments: { who: 'x' } })));
    expect(raced).toEqual(told);
    expect(r.stats()['prompts/get'] ?? 0).toBe(gets);
    await expect.poll(() => rowsOn(r.hub, 'prompts/get'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'cancelled', code: null, message: G_GONE }]);
  }, 60_000);

  it('completion/complete: the same', async () => {
    const r = await rigged('modern', 'prompts/list');
    const s = await legacySession(r.g);
    const raced = await reloadAsRowIsWritten(r, 'prompts/list', G_REMOVED, () => gone(s.request(1, 'completion/complete', { ref: { type: 'ref/prompt', name: 'r__greet' }, argument: { name: 'who', value: '' } })));
    expect(raced).toEqual(told);
    await expect.poll(() => rowsOn(r.hub, 'completion/complete'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'cancelled', code: null, message: G_GONE }]);
  }, 60_000);

  it('resources/read: the same', async () => {
    const r = await rigged('modern', 'resources/list');
    const s = await legacySession(r.g);
    const reads = r.stats()['resources/read'] ?? 0;
    const raced = await reloadAsRowIsWritten(r, 'resources/list', G_REMOVED, () => gone(s.request(1, 'resources/read', { uri: 'mut://doc' })));
    expect(raced).toEqual(told);
    expect(r.stats()['resources/read'] ?? 0).toBe(reads);
    await expect.poll(() => rowsOn(r.hub, 'resources/read'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'cancelled', code: null, message: G_GONE }]);
  }, 60_000);

  it('resources/subscribe: the same', async () => {
    const r = await rigged('legacy', 'resources/unsubscribe');
    const s = await legacySession(r.g);
    expect((await s.request(1, 'resources/subscribe', { uri: 'mut://doc' })).body?.result).toEqual({});
    const subscribes = r.stats()['resources/subscribe'];
    const waitsLines = () => r.hub.logs.filter((l) => l.includes('a subscribe waits for the unsubscribe of its URI on its way there')).length;
    const raced = await reloadAsRowIsWritten(
      r,
      'resources/unsubscribe',
      G_REMOVED,
      async () => {
        const unsubscribed = s.request(2, 'resources/unsubscribe', { uri: 'mut://doc' });
        await expect.poll(() => r.stats()['resources/unsubscribe'] ?? 0, { timeout: 10_000, interval: 20 }).toBe(1);
        return { unsubscribed, subscribed: gone(s.request(3, 'resources/subscribe', { uri: 'mut://doc' })) };
      },
      () => expect.poll(waitsLines, { timeout: 10_000, interval: 20 }).toBe(1),
    );
    expect(await raced.subscribed).toEqual(told);
    expect(r.stats()['resources/subscribe']).toBe(subscribes);
    await expect.poll(() => rowsOn(r.hub, 'resources/subscribe').slice(1), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'cancelled', code: null, message: G_GONE }]);
  }, 60_000);
});
