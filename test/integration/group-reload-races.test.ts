/**
 * Requests on a tool group's endpoint (`/mcp/<group>`) while a reload that changes only the
 * groups hides a tool from that group, through the real hub and a real upstream process: once
 * the reload is applied, the hidden tool is neither listed nor called through the group, whether
 * the request's list or route was being looked up then (the group is applied to what the lists
 * come back with, after they come) or it was routed already and held before it was sent. So for
 * a reload that changes the server's own tool settings and keeps its connection.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { firstText, modernPost, waitForReady, type Json } from '../helpers/wire.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { tmp } from './catalog-helpers.js';
import { heldNow, holdingPlugin } from '../helpers/hold-plugin.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const TOOLS = JSON.stringify(['echo', 'other'].map((name) => ({ name, inputSchema: { type: 'object' } })));
/** What group g shows before the reload (every tool of r), and after (r__echo denied). */
const BEFORE = { g: { servers: ['r'] } };
const AFTER = { g: { servers: ['r'], deny: ['r__echo'] } };

interface Rig {
  hub: HubProcess;
  dir: string;
  /** The endpoint of group g. */
  g: string;
  /** While this file is missing, r's tools/list is not answered. */
  gate: string;
  stats: () => Record<string, number>;
  /** Writes AFTER as the groups and waits for the reload to be applied (its `config reloaded`). */
  hideEcho: () => Promise<void>;
}

let hub: HubProcess | undefined;
afterEach(async () => {
  await hub?.stop();
  hub = undefined;
});

async function rigged(plugin?: (dir: string) => string): Promise<Rig> {
  const dir = tmp();
  if (plugin) writeFileSync(join(dir, 'plugin.mjs'), plugin(dir));
  const gate = join(dir, 'gate');
  const statsFile = join(dir, 'stats.json');
  writeFileSync(gate, '');
  // Lists kept 0 ms: a route that needs r's list asks r for it (and waits at the gate).
  const r = nodeServer(MUTABLE, [], { ERA: 'modern', LIST_TTL_MS: '0', TOOLS, PID_TAG: '1', LIST_GATE: gate, STATS_FILE: statsFile });
  hub = await startHub({ groups: BEFORE, ...(plugin ? { plugins: { paths: ['./plugin.mjs'] } } : {}), servers: { r } }, { dir });
  const h = hub;
  await waitForReady(h.url, ['r']);
  const stats = () => JSON.parse(readFileSync(statsFile, 'utf8')) as Record<string, number>;
  const hideEcho = async () => {
    setSection(h, 'groups', AFTER);
    await loggedTimes(h, 'config reloaded', 1);
  };
  return { hub: h, dir, g: h.url.replace(/\/mcp$/, '/mcp/g'), gate, stats, hideEcho };
}

/** Sends `request` with r's lists held, waits until it asked r for its tools, reloads, then lets r answer. */
async function acrossReload(r: Rig, request: () => Promise<Json | undefined>): Promise<Json | undefined> {
  rmSync(r.gate);
  const before = r.stats()['tools/list'] ?? 0;
  const pending = request();
  await expect.poll(() => r.stats()['tools/list'] ?? 0, { timeout: 10_000, interval: 20 }).toBeGreaterThan(before);
  await r.hideEcho();
  writeFileSync(r.gate, '');
  return pending;
}

/** The tools/call rows of request `id`. */
function rowsOf(hub: HubProcess, id: string): Json[] {
  const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
  try {
    return db.prepare('SELECT outcome, error_code AS code, tool_group AS "group", server FROM audit WHERE method = ? AND request_id = ?').all('tools/call', id) as Json[];
  } finally {
    db.close();
  }
}

const names = (listed: Json | undefined) => ((listed?.tools ?? []) as Json[]).map((t) => t.name);

describe('a request on /mcp/<group> while a reload hides one of its tools from the group', () => {
  it('tools/list: a list built across the reload shows the group as reloaded, and so do the lists after it', async () => {
    const r = await rigged();
    expect(names((await modernPost(r.g, 'first', 'tools/list')).body?.result)).toEqual(['r__echo', 'r__other']);
    const listed = await acrossReload(r, async () => (await modernPost(r.g, 'held', 'tools/list')).body?.result);
    expect(names(listed)).toEqual(['r__other']);
    expect(names((await modernPost(r.g, 'after', 'tools/list')).body?.result)).toEqual(['r__other']);
    // The whole hub still shows it.
    expect(names((await modernPost(r.hub.url, 'all', 'tools/list')).body?.result)).toEqual(['r__echo', 'r__other']);
  });

  it('tools/call: a call whose route waited for the tools list is unknown to the group, and not sent', async () => {
    const r = await rigged();
    const calls = r.stats()['tools/call'] ?? 0;
    const reply = await acrossReload(r, async () => (await modernPost(r.g, 'raced', 'tools/call', { name: 'r__echo', arguments: { text: 'raced' } })).body as Json | undefined);
    expect(reply?.error).toMatchObject({ code: -32602, message: 'Unknown tool: r__echo' });
    expect(r.stats()['tools/call'] ?? 0).toBe(calls);
  });

  it('tools/call: a call routed before the reload and held before it is sent (a plugin) is not sent', async () => {
    // Its beforeCall holds the call whose text is `held` until the file `open` exists, and says so by writing `holding`.
    const r = await rigged(holdingPlugin);
    // Routed by the aggregate built last (no list waited for).
    expect(String(firstText((await modernPost(r.g, 'first', 'tools/call', { name: 'r__echo', arguments: { text: 'first' } })).body?.result))).toMatch(/^echo:first@\d+$/);
    const calls = r.stats()['tools/call'];
    const pending = modernPost(r.g, 'held', 'tools/call', { name: 'r__echo', arguments: { text: 'held' } });
    await expect.poll(() => existsSync(join(r.dir, 'holding')), { timeout: 10_000, interval: 20 }).toBe(true);
    await r.hideEcho();
    writeFileSync(join(r.dir, 'open'), '');
    const reply = (await pending).body;
    expect(String(firstText(reply?.result))).not.toMatch(/^echo:held@/);
    expect(r.stats()['tools/call']).toBe(calls);
    expect(reply?.error).toMatchObject({ code: -32602, message: 'Unknown tool: r__echo' });
    // Its row (begun when it was routed) says what its client was told.
    await expect.poll(() => rowsOf(r.hub, 'held'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'rpc_error', code: -32602, group: 'g', server: 'r' }]);
    // The whole hub's endpoint still calls it.
    expect(String(firstText((await modernPost(r.hub.url, 'all', 'tools/call', { name: 'r__echo', arguments: { text: 'all' } })).body?.result))).toMatch(/^echo:all@\d+$/);
  });
});

describe("a call held before it is sent while a reload changes its server's own tool settings (the connection kept)", () => {
  /** Sets servers.r.tools (r is updated in place: same connection, new settings) and waits for the reload. */
  async function setTools(r: Rig, tools: Json): Promise<void> {
    const config = JSON.parse(readFileSync(r.hub.configFile, 'utf8')) as { servers: { r: Json } };
    config.servers.r.tools = tools;
    writeFileSync(r.hub.configFile, JSON.stringify(config));
    await loggedTimes(r.hub, '"updated":["r"]', 1);
  }

  it('a tool the server denies now is answered Unknown tool and not sent; another tool held across the same reload runs', async () => {
    const r = await rigged(holdingPlugin);
    const calls = r.stats()['tools/call'] ?? 0;
    const denied = modernPost(r.hub.url, 'held', 'tools/call', { name: 'r__echo', arguments: { text: 'held' } });
    await heldNow(r.dir);
    const kept = modernPost(r.hub.url, 'kept', 'tools/call', { name: 'r__other', arguments: { text: 'held' } });
    await expect.poll(() => existsSync(join(r.dir, 'holding')), { timeout: 10_000, interval: 20 }).toBe(true);
    await setTools(r, { deny: ['echo'] });
    writeFileSync(join(r.dir, 'open'), '');
    const reply = (await denied).body;
    expect(reply?.error).toMatchObject({ code: -32602, message: 'Unknown tool: r__echo' });
    expect((await kept).body?.result).toBeDefined();
    expect(r.stats()['tools/call']).toBe(calls + 1);
    await expect.poll(() => rowsOf(r.hub, 'held'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'rpc_error', code: -32602, group: null, server: 'r' }]);
  });
});
