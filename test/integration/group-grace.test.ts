/**
 * The start-up grace on a tool group's endpoint (`/mcp/<group>`), a completion held in the
 * grace, and many requests waiting for a server to start (or to be back after a crash). Real hub, the mutable fixture upstream (one held starting by a hold file for as long as
 * a test needs, whatever the machine's load), the official SDK clients of both eras.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { META_CAPS, MODERN_VERSION, modernBody, modernHeaders, modernMeta, modernPost, post, waitForReady, type Json, type RawReply } from '../helpers/wire.js';
import { MODERN_FIXTURE, USER_CAPABILITIES } from '../fixtures/translation/peers.js';
import { tmp } from './catalog-helpers.js';
import { waitForState } from './faults-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';

/** A mutable fixture server that does not start while `hold` exists (start-delay.mjs). */
function heldServer(hold: string, env: Record<string, string> = {}): Json {
  const s = nodeServer(MUTABLE, [], { ERA: 'modern', START_HOLD_FILE: hold, ...env });
  return { ...s, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(s.args as string[])] };
}

/** `work`'s value, or 'held' when it took longer than `ms` (the hub held it in the grace, which outlasts the test). */
async function within<T>(ms: number, work: Promise<T>): Promise<T | 'held'> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<'held'>((r) => (timer = setTimeout(() => r('held'), ms)));
  try {
    return await Promise.race([work, bound]);
  } finally {
    clearTimeout(timer);
  }
}

// The grace (SWITCHYARD_STARTUP_GRACE_MS) is made to outlast each test: `late` is held starting
// by its hold file until the test removes it, so the grace runs all the while.
const GRACE = { env: { SWITCHYARD_STARTUP_GRACE_MS: '120000' } };

describe("in the start-up grace, a group's clients wait only for the servers the group shows", () => {
  it("lists, a legacy initialize and a modern server/discover on /mcp/<group> are answered while a server it does not show starts; /mcp's wait for it", async () => {
    const hold = join(tmp(), 'late.hold');
    writeFileSync(hold, '');
    const hub = await startHub(
      { groups: { mine: { servers: ['m'] } }, servers: { m: nodeServer(MUTABLE, [], { ERA: 'modern', PROMPTS: '1' }), late: heldServer(hold) } },
      GRACE,
    );
    const clients: { close(): Promise<void> }[] = [];
    try {
      await waitForReady(hub.url, ['m']);
      // A /mcp client's list waits for late (the whole hub's), for as long as it is held.
      let allAnswered = false;
      const all = modernPost(hub.url, 'all-tools', 'tools/list').then((r) => ((allAnswered = true), r));
      const mine = hub.url.replace(/\/mcp$/, '/mcp/mine');
      const legacy = async () => {
        const c = new ClientV1({ name: 'group-grace-v1', version: '1.0.0' });
        clients.push(c);
        await c.connect(new TransportV1(new URL(mine)));
        const [tools, prompts, resources] = await Promise.all([c.listTools(), c.listPrompts(), c.listResources()]);
        return { tools: tools.tools.map((t) => t.name), prompts: prompts.prompts.map((p) => p.name), resources: resources.resources.map((r) => r.uri) };
      };
      const modern = async () => {
        const c = new ClientV2({ name: 'group-grace-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
        clients.push(c);
        const t = new TransportV2(new URL(mine));
        await c.connect(t);
        const [tools, prompts, resources] = await Promise.all([c.listTools(), c.listPrompts(), c.listResources()]);
        return { era: t.protocolVersion, tools: tools.tools.map((t) => t.name), prompts: prompts.prompts.map((p) => p.name), resources: resources.resources.map((r) => r.uri) };
      };
      const read = modernPost(mine, 'mine-read', 'resources/read', { uri: 'mut://doc' });
      // Each was held for the whole grace (late is not the group's).
      const [v1, v2, doc] = await Promise.all([within(20_000, legacy()), within(20_000, modern()), within(20_000, read)]);
      const shown = { tools: ['m__echo', 'm__add'], prompts: ['m__greet'], resources: ['mut://doc'] };
      expect(v1, 'the legacy handshake and lists were held for a server the group does not show').toMatchObject({ ...shown, tools: expect.arrayContaining(shown.tools) });
      expect(v2, 'the modern discovery and lists were held for a server the group does not show').toMatchObject({ era: MODERN_VERSION, ...shown, tools: expect.arrayContaining(shown.tools) });
      expect(doc === 'held' ? doc : doc.body?.result).toMatchObject({ contents: [{ uri: 'mut://doc', text: 'first version' }] });
      // All the while, the grace held /mcp's list (late still starting): it is the group's
      // scope, not the grace's end, that let the group's clients on.
      expect(allAnswered).toBe(false);
      rmSync(hold);
      const full = (await all).body?.result?.tools as Json[] | undefined;
      expect(full?.map((t) => String(t.name))).toEqual(expect.arrayContaining(['m__echo', 'late__echo']));
    } finally {
      if (existsSync(hold)) rmSync(hold);
      for (const c of clients) await c.close().catch(() => undefined);
      await hub.stop();
    }
  }, 90_000);
  it('a call there still waits for a failMode "closed" server outside the group (it holds every call hub-wide), while its lists do not', async () => {
    const hold = join(tmp(), 'guard.hold');
    writeFileSync(hold, '');
    const hub = await startHub(
      { groups: { mine: { servers: ['m'] } }, servers: { m: nodeServer(MUTABLE, [], { ERA: 'modern' }), guard: { ...heldServer(hold), failMode: 'closed' } } },
      GRACE,
    );
    const mine = hub.url.replace(/\/mcp$/, '/mcp/mine');
    try {
      await waitForReady(hub.url, ['m']);
      const closedWaits = () => hub.logs.filter((l) => l.includes('calls wait for the failMode \\"closed\\" servers still starting')).length;
      let answered = false;
      const call = modernPost(mine, 'mine-call', 'tools/call', { name: 'm__echo', arguments: { text: 'after guard' } }).then((r) => ((answered = true), r));
      await expect.poll(() => answered || closedWaits() > 0, { timeout: 20_000, interval: 20 }).toBe(true);
      // Held while guard starts, not refused as by a failMode "closed" server down.
      expect(answered ? (await call).text : answered).toBe(false);
      const list = await within(20_000, modernPost(mine, 'mine-list', 'tools/list'));
      expect(list === 'held' ? list : ((list.body?.result?.tools ?? []) as Json[]).map((t) => String(t.name))).toEqual(expect.arrayContaining(['m__echo']));
      expect(answered).toBe(false);
      rmSync(hold);
      const r = await call;
      expect(r.body?.result, r.text).toMatchObject({ content: [{ type: 'text', text: 'echo:after guard' }] });
    } finally {
      if (existsSync(hold)) rmSync(hold);
      await hub.stop();
    }
  }, 90_000);
});

describe('many requests waiting for a server starting', () => {
  it("in the start-up grace, one on each of twelve groups, share the server's state events: no MaxListenersExceededWarning", async () => {
    const hold = join(tmp(), 'late.hold');
    writeFileSync(hold, '');
    const names = Array.from({ length: 12 }, (_, i) => `g${i}`);
    const groups = Object.fromEntries(names.map((g) => [g, { servers: ['late'] }]));
    const hub = await startHub({ groups, servers: { late: heldServer(hold) } }, GRACE);
    try {
      const waits = () => hub.logs.filter((l) => l.includes('waits in the start-up grace')).length;
      // Each group's list waits in the grace (one wait per group): each wait listened to the
      // starting server itself, and Node warned past ten listeners of its state.
      const lists = names.map((g) => modernPost(hub.url.replace(/\/mcp$/, `/mcp/${g}`), `list-${g}`, 'tools/list'));
      await expect.poll(waits, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(names.length);
      rmSync(hold);
      const answered = await Promise.all(lists);
      expect(answered.map((r) => ((r.body?.result?.tools ?? []) as Json[]).length > 0)).toEqual(names.map(() => true));
      expect(hub.logs.filter((l) => l.includes('MaxListeners'))).toEqual([]);
    } finally {
      if (existsSync(hold)) rmSync(hold);
      await hub.stop();
    }
  }, 90_000);

  it("so do calls waiting for a server's first start past the grace: no MaxListenersExceededWarning with twelve of them", async () => {
    const hold = join(tmp(), 'late.hold');
    writeFileSync(hold, '');
    // No grace: each call by a name in late's prefix space waits for late's first start
    // (hub/first-start.ts), as calls rerouted after a `servers restart` do.
    const hub = await startHub({ servers: { late: heldServer(hold) } }, { env: { SWITCHYARD_STARTUP_GRACE_MS: '0' } });
    try {
      const waits = () => hub.logs.filter((l) => l.includes('waiting for the first start of its server')).length;
      const calls = Array.from({ length: 12 }, (_, i) => modernPost(hub.url, `c${i}`, 'tools/call', { name: 'late__echo', arguments: { text: `x${i}` } }));
      await expect.poll(waits, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(12);
      rmSync(hold);
      const answered = await Promise.all(calls);
      expect(answered.map((r) => r.body?.result)).toEqual(answered.map((_, i) => expect.objectContaining({ content: [{ type: 'text', text: `echo:x${i}` }] })));
      expect(hub.logs.filter((l) => l.includes('MaxListeners'))).toEqual([]);
    } finally {
      if (existsSync(hold)) rmSync(hold);
      await hub.stop();
    }
  }, 90_000);
});

describe('many requests waiting for a server restarting after a crash', () => {
  it("a dozen modern retries of a round share the server's state events as they wait for it back: no MaxListenersExceededWarning", async () => {
    // Absent as the server first starts; made before the crash, it holds the restart until the
    // retries all wait (start-delay.mjs).
    const hold = join(tmp(), 'back.hold');
    const s = nodeServer(MODERN_FIXTURE, [], { SERVER_NAME: 'modern-stdio', START_HOLD_FILE: hold });
    const hub = await startHub({ servers: { ms: { ...s, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(s.args as string[])] } } });
    const name = 'ms__elicit_form';
    const send = async (id: string, params: Json): Promise<Json> => {
      const r = await post(hub.url, modernBody(id, 'tools/call', { name, arguments: { who: id }, ...params }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', name));
      const m = r.messages.find((x) => x.id === id);
      if (!m) throw new Error(`${r.status} ${r.text}`);
      return m as Json;
    };
    try {
      await waitForReady(hub.url, ['ms']);
      const ids = Array.from({ length: 12 }, (_, i) => `r${i}`);
      const states = await Promise.all(ids.map(async (id) => ((await send(id, {})).result as Json | undefined)?.requestState));
      expect(states).toEqual(ids.map(() => expect.stringMatching(/^sy1\./)));
      writeFileSync(hold, '');
      const spawned = hub.logs.filter((l) => l.includes('"msg":"spawned"')).map((l) => JSON.parse(l) as Json);
      process.kill(spawned.filter((l) => l.server === 'ms').at(-1)?.pid as number, 'SIGKILL');
      await waitForState(hub.url, 'ms', ['restarting', 'starting'], 10_000);
      // Each retry waits for the server back (hub/back-soon.ts): each wait listened to the
      // upstream itself, and Node warned past ten listeners of its state.
      const waits = () => hub.logs.filter((l) => l.includes('a retry waits for its server to be back')).length;
      const retries = ids.map((id, i) => send(id, { requestState: states[i], inputResponses: { name: { action: 'accept', content: { name: id } } } }));
      await expect.poll(waits, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(ids.length);
      rmSync(hold);
      const answered = await Promise.all(retries);
      expect(answered.map((r) => r.result)).toEqual(ids.map((id) => expect.objectContaining({ content: [{ type: 'text', text: `action=accept content={"name":"${id}"}` }] })));
      expect(hub.logs.filter((l) => l.includes('MaxListeners'))).toEqual([]);
    } finally {
      if (existsSync(hold)) rmSync(hold);
      await hub.stop();
    }
  }, 90_000);
});

describe('many calls in flight when their server crashes', () => {
  it('retried, each waiting for the restart between attempts, share its state events: no MaxListenersExceededWarning', async () => {
    const dir = tmp();
    const [hold, gate] = [join(dir, 'restart.hold'), join(dir, 'gate')];
    // `held` answers once the gate file is there; safe to send again (idempotentHint), so a call
    // the crash cut is retried once the server is back; the hold file holds the restart.
    const s = heldServer(hold, { TOOLS: JSON.stringify([{ name: 'held', inputSchema: { type: 'object' } }]) });
    const hub = await startHub({ servers: { c: { ...s, retry: { maxAttempts: 3, budgetMs: 60_000 }, tools: { held: { annotations: { idempotentHint: true } } } } } });
    try {
      await waitForReady(hub.url, ['c']);
      const ids = Array.from({ length: 12 }, (_, i) => `h${i}`);
      const calls = ids.map((id) => modernPost(hub.url, id, 'tools/call', { name: 'c__held', arguments: { started: join(dir, `${id}.started`), gate } }));
      await expect.poll(() => ids.filter((id) => existsSync(join(dir, `${id}.started`))).length, { timeout: 20_000, interval: 20 }).toBe(ids.length);
      writeFileSync(hold, '');
      const spawned = hub.logs.filter((l) => l.includes('"msg":"spawned"')).map((l) => JSON.parse(l) as Json);
      process.kill(spawned.filter((l) => l.server === 'c').at(-1)?.pid as number, 'SIGKILL');
      // Each call, sent again, waits for the restart (RpcBase.whenReady): each wait listened to
      // the upstream itself, and Node warned past ten listeners of its state.
      const retries = () => hub.logs.filter((l) => l.includes('sending the request again')).length;
      await expect.poll(retries, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(ids.length);
      writeFileSync(gate, '');
      rmSync(hold);
      const answered = await Promise.all(calls);
      expect(answered.map((r) => r.body?.result)).toEqual(ids.map(() => expect.objectContaining({ content: [{ type: 'text', text: 'let go' }] })));
      expect(hub.logs.filter((l) => l.includes('MaxListeners'))).toEqual([]);
    } finally {
      if (existsSync(hold)) rmSync(hold);
      writeFileSync(gate, '');
      await hub.stop();
    }
  }, 90_000);
});

describe('in the start-up grace, a completion let on for a ready server\'s prompt but held in the grace', () => {
  const rowsOf = (hub: HubProcess, id: string): Json[] => {
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
    try {
      return db.prepare('SELECT outcome, error_code AS code FROM audit WHERE method = ? AND request_id = ?').all('completion/complete', id) as Json[];
    } finally {
      db.close();
    }
  };

  it('is answered as the same request is once the grace is over: -32601 while no server offers completions', async () => {
    const hold = join(tmp(), 'late.hold');
    writeFileSync(hold, '');
    // Neither offers completions; m offers prompts, and a completion of an argument of a prompt
    // named in m's prefix space is let on at the edge (Hub.familyInGrace), but m does not list
    // m__nosuch, so the grace holds it (Hub.passesGrace) until late has started.
    const hub = await startHub({ servers: { m: nodeServer(MUTABLE, [], { ERA: 'modern', PROMPTS: '1' }), late: heldServer(hold) } }, GRACE);
    const complete = (id: string): Promise<RawReply> => modernPost(hub.url, id, 'completion/complete', { ref: { type: 'ref/prompt', name: 'm__nosuch' }, argument: { name: 'who', value: 'a' } });
    try {
      await waitForReady(hub.url, ['m']);
      const waits = () => hub.logs.filter((l) => l.includes('waits in the start-up grace')).length;
      const before = waits();
      const inGrace = complete('in-grace');
      await expect.poll(waits, { timeout: 20_000, interval: 20 }).toBeGreaterThan(before);
      rmSync(hold);
      const held = await inGrace;
      await waitForReady(hub.url, ['m', 'late']);
      const after = await complete('after-grace');
      expect(after.body?.error, after.text).toMatchObject({ code: -32601 });
      expect(after.status).toBe(404);
      expect(held.body?.error, held.text).toEqual(after.body?.error);
      expect(held.status).toBe(404);
      await expect.poll(() => rowsOf(hub, 'in-grace'), { timeout: 5_000, interval: 20 }).toEqual([{ outcome: 'rpc_error', code: -32601 }]);
    } finally {
      if (existsSync(hold)) rmSync(hold);
      await hub.stop();
    }
  }, 90_000);
});
