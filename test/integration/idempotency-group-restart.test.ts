/**
 * A keyed tools/call on a tool group's endpoint (`/mcp/<group>`) whose call ran before the hub
 * restarted (its answer kept in the persistent ledger) is answered from the key on the fresh hub
 * as on `/mcp`, though a failMode "closed" server is down now: the group shows the tool, by its
 * server's list, while the hub's own tools list is not built yet (`slow`'s tools/list held by its
 * gate file). A tool the group does not show gets no kept answer there. Nor does a retry wait for
 * that list while its tool's server is still starting, and one whose client cancels while its
 * key's tool is routed is recorded cancelled. Real hub processes, the mutable fixture upstream,
 * raw modern requests.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nodeServer, ROOT, startHub } from '../helpers/hub-process.js';
import { firstText, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';
import { queryRows, type Row } from './ledger-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';

describe('a keyed call on a group endpoint of a restarted hub, a failMode "closed" server down', () => {
  it('gets its kept answer where the group shows the tool, as on /mcp; not where the group hides it', async () => {
    const dir = tmp();
    const [gate, slowStats] = [join(dir, 'slow-gate'), join(dir, 'slow-stats.json')];
    const keyed = async (url: string, id: string, name: string, args: Json, key: string) => {
      const r = await post(url, modernBody(id, 'tools/call', { name, arguments: args }, { ...modernMeta(), 'dev.switchyard/idempotency-key': key }), modernHeaders('tools/call', name));
      return r.body?.error ? `error: ${JSON.stringify(r.body.error)}` : String(firstText(r.body?.result));
    };
    const first = await startHub(
      {
        groups: { mine: { servers: ['m', 'slow'], tools: ['m__echo', 'm__add'] } },
        servers: {
          m: nodeServer(MUTABLE, [], { ERA: 'modern', TAG: ' (first)' }),
          slow: nodeServer(MUTABLE, [], { ERA: 'modern' }),
          guard: { ...nodeServer(MUTABLE, [], { ERA: 'modern' }), failMode: 'closed' },
        },
      },
      { dir },
    );
    let mine = first.url.replace(/\/mcp$/, '/mcp/mine');
    try {
      await waitForReady(first.url, ['m', 'slow', 'guard']);
      expect(await keyed(mine, 'a1', 'm__echo', { text: 'a' }, 'k')).toBe('echo:a (first)');
      expect(await keyed(first.url, 'a2', 'm__echo', { text: 'a' }, 'k')).toBe('echo:a (first)');
      expect(await keyed(mine, 'a3', 'm__add', { a: 1, b: 2 }, 'hidden')).toBe('3');
    } finally {
      await first.stop();
    }
    // The fresh hub: guard cannot start, slow's tools/list is held (so no tools list of the hub's
    // is built), and the group no longer shows m__add.
    const hub = await startHub(
      {
        groups: { mine: { servers: ['m', 'slow'], tools: ['m__echo'] } },
        servers: {
          m: nodeServer(MUTABLE, [], { ERA: 'modern', TAG: ' (second)' }),
          slow: nodeServer(MUTABLE, [], { ERA: 'modern', LIST_GATE: gate, STATS_FILE: slowStats }),
          guard: { command: process.execPath, args: ['-e', 'process.exit(3)'], failMode: 'closed' },
        },
      },
      { dir },
    );
    mine = hub.url.replace(/\/mcp$/, '/mcp/mine');
    try {
      await waitForReady(hub.url, ['m', 'slow']);
      await expect.poll(() => (existsSync(slowStats) ? (JSON.parse(readFileSync(slowStats, 'utf8')) as Json)['tools/list'] : 0), { timeout: 10_000, interval: 20 }).toBe(1);
      // A new call is refused: guard is down.
      expect(await keyed(mine, 'b0', 'm__echo', { text: 'new' }, 'k-new')).toMatch(/failMode "closed"/);
      // On /mcp the kept answer.
      expect(await keyed(hub.url, 'b1', 'm__echo', { text: 'a' }, 'k')).toBe('echo:a (first)');
      // On the group's endpoint too: the group shows m__echo.
      expect(await keyed(mine, 'b2', 'm__echo', { text: 'a' }, 'k')).toBe('echo:a (first)');
      // A tool the group hides now: not its kept answer; refused as a new call is.
      expect(await keyed(mine, 'b3', 'm__add', { a: 1, b: 2 }, 'hidden')).toMatch(/failMode "closed"/);
      expect(existsSync(gate)).toBe(false); // all the while slow's list was held
    } finally {
      writeFileSync(gate, '');
      await hub.stop();
    }
  }, 90_000);

  it("is answered at once while the tool's server is still starting, not after the other servers' lists (the hub's tools list to route it by)", async () => {
    const dir = tmp();
    const [gate, slowStats, hold] = [join(dir, 'slow-gate'), join(dir, 'slow-stats.json'), join(dir, 'm-hold')];
    const groups = { mine: { servers: ['m', 'slow'], tools: ['m__echo'] } };
    const keyed = async (url: string, id: string, key: string) => {
      const r = await post(url, modernBody(id, 'tools/call', { name: 'm__echo', arguments: { text: 'a' } }, { ...modernMeta(), 'dev.switchyard/idempotency-key': key }), modernHeaders('tools/call', 'm__echo'));
      return r.body?.error ? `error: ${JSON.stringify(r.body.error)}` : String(firstText(r.body?.result));
    };
    const first = await startHub({ groups, servers: { m: nodeServer(MUTABLE, [], { ERA: 'modern', TAG: ' (first)' }), slow: nodeServer(MUTABLE, [], { ERA: 'modern' }) } }, { dir });
    try {
      await waitForReady(first.url, ['m', 'slow']);
      expect(await keyed(first.url.replace(/\/mcp$/, '/mcp/mine'), 'a1', 'k')).toBe('echo:a (first)');
      expect(await keyed(first.url, 'a2', 'k')).toBe('echo:a (first)');
    } finally {
      await first.stop();
    }
    // The fresh hub: m does not start while its hold file exists; slow's tools/list is held, and
    // waited for up to its timeoutMs (10 min), far past this test's.
    writeFileSync(hold, '');
    const m = nodeServer(MUTABLE, [], { ERA: 'modern', TAG: ' (second)', START_HOLD_FILE: hold });
    const hub = await startHub(
      {
        groups,
        servers: {
          m: { ...m, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(m.args as string[])], timeoutMs: 600_000 },
          slow: { ...nodeServer(MUTABLE, [], { ERA: 'modern', LIST_GATE: gate, STATS_FILE: slowStats }), timeoutMs: 600_000 },
        },
      },
      { dir },
    );
    try {
      await waitForReady(hub.url, ['slow']);
      await expect.poll(() => (existsSync(slowStats) ? (JSON.parse(readFileSync(slowStats, 'utf8')) as Json)['tools/list'] : 0), { timeout: 10_000, interval: 20 }).toBe(1);
      // Each waits at most the start-up grace (3 s) for m; a bound far above that, far below the held list's timeout.
      const bounded = (p: Promise<string>) => Promise.race([p, new Promise<string>((r) => setTimeout(() => r('still waiting after 30 s'), 30_000).unref())]);
      expect(await bounded(keyed(hub.url, 'b1', 'k'))).toBe('echo:a (first)');
      expect(await bounded(keyed(hub.url.replace(/\/mcp$/, '/mcp/mine'), 'b2', 'k'))).toBe('echo:a (first)');
      expect(existsSync(gate) || !existsSync(hold)).toBe(false); // all the while both were held
    } finally {
      writeFileSync(gate, '');
      rmSync(hold, { force: true });
      await hub.stop();
    }
  }, 120_000);

  it("cancelled by its client while its key's tool is routed for the group (the hub's list not built): recorded cancelled, not refused", async () => {
    const dir = tmp();
    const [gate, slowStats] = [join(dir, 'slow-gate'), join(dir, 'slow-stats.json')];
    const groups = { mine: { servers: ['m', 'slow'] } };
    const meta = (key: string) => ({ ...modernMeta(), 'dev.switchyard/idempotency-key': key });
    const keyed = async (url: string, id: string, name: string, args: Json, key: string) => {
      const r = await post(url, modernBody(id, 'tools/call', { name, arguments: args }, meta(key)), modernHeaders('tools/call', name));
      return r.body?.error ? `error: ${JSON.stringify(r.body.error)}` : String(firstText(r.body?.result));
    };
    const first = await startHub({ groups, servers: { m: nodeServer(MUTABLE, [], { ERA: 'modern' }), slow: nodeServer(MUTABLE, [], { ERA: 'modern', TAG: ' (first)' }) } }, { dir });
    try {
      await waitForReady(first.url, ['m', 'slow']);
      expect(await keyed(first.url.replace(/\/mcp$/, '/mcp/mine'), 'a1', 'slow__echo', { text: 's' }, 'k')).toBe('echo:s (first)');
    } finally {
      await first.stop();
    }
    // The fresh hub: slow's tools/list is held (a group's client's key's tool slow__echo is routed
    // by it, ToolCall.showsTool), and guard, failMode "closed", is down.
    const hub = await startHub(
      {
        groups,
        servers: {
          m: nodeServer(MUTABLE, [], { ERA: 'modern' }),
          slow: { ...nodeServer(MUTABLE, [], { ERA: 'modern', TAG: ' (second)', LIST_GATE: gate, STATS_FILE: slowStats }), timeoutMs: 600_000 },
          guard: { command: process.execPath, args: ['-e', 'process.exit(3)'], failMode: 'closed' },
        },
      },
      { dir },
    );
    const mine = hub.url.replace(/\/mcp$/, '/mcp/mine');
    const routings = () => hub.logs.filter((l) => l.includes("a key's tool routed for a group's client")).length;
    /** Sent, then cut by its client once `routed` routings of a key's tool began. */
    const cut = async (id: string, name: string, args: Json, routed: number): Promise<Row | undefined> => {
      const ac = new AbortController();
      const body = JSON.stringify(modernBody(id, 'tools/call', { name, arguments: args }, meta('k')));
      const sent = fetch(mine, { method: 'POST', headers: modernHeaders('tools/call', name), body, signal: ac.signal }).then((r) => r.text()).catch(() => undefined);
      await expect.poll(routings, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(routed);
      ac.abort();
      await sent;
      let row: Row | undefined;
      for (const until = Date.now() + 10_000; !row && Date.now() < until; await new Promise((r) => setTimeout(r, 50)))
        row = (await queryRows(join(hub.dir, 'ledger.db'), {})).find((r) => r.requestId === id && r.outcome !== 'in_flight');
      return row;
    };
    try {
      await waitForReady(hub.url, ['m', 'slow']);
      await expect.poll(() => (existsSync(slowStats) ? (JSON.parse(readFileSync(slowStats, 'utf8')) as Json)['tools/list'] : 0), { timeout: 10_000, interval: 20 }).toBe(1);
      // Its key's call ended: answered from it past guard's refusal, once slow__echo is routed for
      // the group. It was refused ("failMode closed"), its row written for a client gone.
      const retry = await cut('c1', 'slow__echo', { text: 's' }, 1);
      expect(retry && [retry.outcome, retry.errorKind]).toEqual(['cancelled', null]);
      // The key was used for slow__echo: the refusal names it if the group shows it (routed so).
      // It was written "denied" for a client gone. m__add is routed first, by m's list.
      const other = await cut('c2', 'm__add', { a: 1, b: 2 }, 3);
      expect(other && [other.outcome, other.errorKind]).toEqual(['cancelled', null]);
      expect(existsSync(gate)).toBe(false); // all the while slow's list was held
      // Otherwise as before: once slow's list is in, the kept answer, and the refusal naming the tool.
      writeFileSync(gate, '');
      expect(await keyed(mine, 'd1', 'slow__echo', { text: 's' }, 'k')).toBe('echo:s (first)');
      expect(await keyed(mine, 'd2', 'm__add', { a: 1, b: 2 }, 'k')).toBe('idempotency key "k" was already used for tool "slow__echo"; use a new key');
    } finally {
      writeFileSync(gate, '');
      await hub.stop();
    }
  }, 120_000);
});
