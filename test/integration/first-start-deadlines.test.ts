/**
 * A call by a name no route knows waits for every `"prefix": ""` server still on its first start
 * (hub/first-start.ts), each for as long as its own timeoutMs: a server with a short timeoutMs
 * that hangs does not hold the call for the longer timeoutMs of another, which is ready by
 * then. Real hub, two mutable fixture servers held starting by hold files (start-delay.mjs).
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernPost, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
/** The short timeoutMs, of the server that stays held. */
const SHORT_MS = 2_000;
/** The long one's, and how long the held server's era probe waits: either is past the test's bound. */
const LONG_MS = 60_000;

/** A mutable fixture server without prefix, listing only `tool`, that does not start while `hold` exists. */
function heldBare(hold: string, tool: string, config: Json): Json {
  const s = nodeServer(MUTABLE, [], { ERA: 'modern', START_HOLD_FILE: hold, TOOLS: JSON.stringify([{ name: tool, inputSchema: { type: 'object' } }]) });
  return { ...s, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(s.args as string[])], prefix: '', ...config };
}

let hub: HubProcess | undefined;
const holds: string[] = [];
afterEach(async () => {
  for (const h of holds.splice(0)) if (existsSync(h)) rmSync(h);
  await hub?.stop();
  hub = undefined;
});

describe('a call by a name no route knows, while several servers without prefix are on their first start', () => {
  it("waits for each only as long as that server's own timeoutMs: a short one that hangs does not hold it for a long one's, which is ready", async () => {
    const dir = tmp();
    const [stuckHold, slowHold] = [join(dir, 'stuck.hold'), join(dir, 'slow.hold')];
    for (const h of [stuckHold, slowHold]) writeFileSync(h, ''), holds.push(h);
    // stuck's first attempt outlasts the test (its era probe alone waits LONG_MS): only its own
    // timeoutMs ends the wait for it. slow's ends when it is ready.
    hub = await startHub(
      { servers: { stuck: heldBare(stuckHold, 'other', { timeoutMs: SHORT_MS, probeTimeoutMs: LONG_MS }), slow: heldBare(slowHold, 'echo', { timeoutMs: LONG_MS }) } },
      { env: { SWITCHYARD_STARTUP_GRACE_MS: '0' } },
    );
    const h = hub;
    const t0 = performance.now();
    const call = modernPost(h.url, 'c', 'tools/call', { name: 'echo', arguments: { text: 'x' } }).then((r) => ({ r, ms: performance.now() - t0 }));
    // The call waits on both servers' first starts.
    const waiting = () => h.logs.filter((l) => l.includes('waiting for the first start of its server')).map((l) => (JSON.parse(l) as { servers?: string[] }).servers);
    await expect.poll(waiting, { timeout: 20_000, interval: 20 }).toEqual([['stuck', 'slow']]);
    rmSync(slowHold);
    const { r, ms } = await call;
    expect(r.body?.result).toMatchObject({ content: [{ type: 'text', text: 'echo:x' }] });
    // Not before stuck's own timeoutMs (it might have owned `echo`), and long before slow's:
    // one deadline for all, at the largest timeoutMs, held it about LONG_MS.
    expect(ms).toBeGreaterThanOrEqual(SHORT_MS);
    expect(ms).toBeLessThan(SHORT_MS + 25_000);
  }, 90_000);
});

describe('a call waiting for its server’s first start when that server is replaced', () => {
  const replacements = [
    ['servers restart', async (h: HubProcess) => expect((await fetch(new URL('/admin/servers/a/restart', h.url), { method: 'POST' })).status).toBe(200)],
    ['a reload that changes its environment', async (h: HubProcess) => {
      const config = JSON.parse(readFileSync(h.configFile, 'utf8')) as { servers: { a: { env: Record<string, string> } } };
      config.servers.a.env.SERVER_NAME = 'a2';
      writeFileSync(h.configFile, JSON.stringify(config));
      await expect.poll(() => h.logs.some((l) => l.includes('"restarted":["a"]')), { timeout: 10_000, interval: 20 }).toBe(true);
    }],
  ] as const;

  it.each(replacements)('waits for the new connection (%s) and is answered by it, in either era; not "server stopped" or "Unknown tool"', async (_how, replace) => {
    const dir = tmp();
    const hold = join(dir, 'a.hold');
    writeFileSync(hold, ''), holds.push(hold);
    // Both processes hold their start while the file is there: the old one is replaced while the calls wait for it.
    const a = heldBare(hold, 'echo', { prefix: 'a' });
    hub = await startHub({ servers: { a: { ...a, env: { ...(a.env as Json), SERVER_NAME: 'a1' } } } }, { env: { SWITCHYARD_STARTUP_GRACE_MS: '0' } });
    const h = hub;
    const legacy = await legacySession(h.url);
    const calls = [
      modernPost(h.url, 'm', 'tools/call', { name: 'a__echo', arguments: { text: 'modern' } }),
      legacy.request(1, 'tools/call', { name: 'a__echo', arguments: { text: 'legacy' } }),
    ];
    const waiting = () => h.logs.filter((l) => l.includes('waiting for the first start of its server')).length;
    await expect.poll(waiting, { timeout: 20_000, interval: 20 }).toBe(2);
    await replace(h);
    rmSync(hold);
    const [modern, old] = await Promise.all(calls);
    expect(modern.body?.result).toMatchObject({ content: [{ type: 'text', text: 'echo:modern' }] });
    expect(old.body?.result).toMatchObject({ content: [{ type: 'text', text: 'echo:legacy' }] });
  }, 60_000);
});
