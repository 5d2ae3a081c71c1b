/**
 * A legacy HTTP session a restarted hub takes back while the server of its subscription is still
 * starting (takeback-subscription-gap has it ready): the subscription is held on a connection not
 * ready, and that server, once it watches it again, says it updated itself (a legacy one's
 * subscribe made again, a modern one's listen acknowledged after a gap). That is the gap's signal,
 * said once: not also at the take-back (twice, the first time while nothing watched it), and not
 * lost when it comes before the client's GET stream is open again (said when it opens). The real
 * built hub restarted on its ledger, the stdio fixture mutable-server.mjs held from starting by
 * start-delay.mjs, the SDK 1.x client.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { ROOT, startHub, startHubOnFreePort, type HubProcess } from '../helpers/hub-process.js';
import { firstText, waitForReady } from '../helpers/wire.js';

let hub: HubProcess | undefined;
let dir: string | undefined;
const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close().catch(() => undefined);
  await hub?.stop();
  hub = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const ERAS = { legacy: '2025-11-25', modern: '2026-07-28' } as const;

/** The fixture serving test://x, of `era`, whose process starts only once `hold` is gone. */
const held = (era: keyof typeof ERAS, hold: string): Record<string, unknown> => ({
  command: process.execPath,
  args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), join(ROOT, 'test/fixtures/catalog/mutable-server.mjs')],
  env: { ERA: era, DOC_URI: 'test://x', START_HOLD_FILE: hold },
  era: ERAS[era],
});

/**
 * An SDK 1.x client subscribed to test://x through `url`, recording each update it hears by its
 * `_meta.tag` ('gap' for none), its GET requests held while `hold()` is in force.
 */
async function subscriber(url: string): Promise<{ client: ClientV1; heard: string[]; opened: () => number; hold(): void; release(): void }> {
  let opened = 0;
  let gate: Promise<void> | undefined;
  let open = (): void => undefined;
  const gated: typeof fetch = async (input, init) => {
    if (init?.method !== 'GET') return fetch(input, init);
    if (gate) await gate;
    const res = await fetch(input, init);
    if (res.ok) opened++;
    return res;
  };
  const transport = new TransportV1(new URL(url), { fetch: gated, reconnectionOptions: { initialReconnectionDelay: 300, maxReconnectionDelay: 300, reconnectionDelayGrowFactor: 1, maxRetries: 1_000 } });
  const client = new ClientV1({ name: 'takeback-starting', version: '1.0.0' });
  const heard: string[] = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void heard.push(String((n.params._meta as { tag?: unknown } | undefined)?.tag ?? 'gap')));
  await client.connect(transport);
  closing.push(() => client.close());
  await client.listResources();
  expect(await client.subscribeResource({ uri: 'test://x' })).toEqual({});
  await expect.poll(() => opened, { timeout: 10_000, interval: 20 }).toBe(1);
  return {
    client,
    heard,
    opened: () => opened,
    hold: () => void (gate = new Promise((r) => (open = r))),
    release: () => {
      gate = undefined;
      open();
    },
  };
}

/** A real update of test://x, tagged, once the server holds the subscription again. */
async function touch(client: ClientV1, era: keyof typeof ERAS): Promise<void> {
  const said = async () => firstText(await client.callTool({ name: 'm__touch', arguments: { uri: 'test://x', report: true, meta: { tag: 'touch' } } }));
  if (era === 'legacy') await expect.poll(said, { timeout: 10_000, interval: 50 }).toBe('told 1');
  else await said();
}

describe('a session taken back while the server of its subscription still starts', () => {
  for (const era of ['legacy', 'modern'] as const)
    it(`its GET stream open before the ${era} server is ready: told the gap once, by the server watching it again`, async () => {
      dir = mkdtempSync(join(tmpdir(), 'takeback-starting-'));
      const hold = join(dir, 'hold');
      ({ hub } = await startHubOnFreePort({ servers: { m: held(era, hold) } }));
      const { dir: hubDir, port, url } = hub;
      await waitForReady(url, ['m']);
      const s = await subscriber(url);
      writeFileSync(hold, '');
      expect(await hub.stop()).toBe(0);
      hub = await startHub({ servers: { m: held(era, hold) } }, { dir: hubDir, port });
      // The client's GET stream comes back by itself, and takes the session back.
      await expect.poll(s.opened, { timeout: 20_000, interval: 20 }).toBe(2);
      await expect.poll(() => hub!.logs.some((l) => l.includes('legacy session taken back (')), { timeout: 10_000, interval: 20 }).toBe(true);
      rmSync(hold);
      await waitForReady(url, ['m']);
      // The server's own signal, once it watches the URI again; then a real update.
      await expect.poll(() => s.heard.length, { timeout: 10_000, interval: 20 }).toBeGreaterThan(0);
      await touch(s.client, era);
      await expect.poll(() => s.heard.includes('touch'), { timeout: 10_000, interval: 20 }).toBe(true);
      expect(s.heard).toEqual(['gap', 'touch']);
    }, 90_000);

  it('taken back by a POST, the server ready before the GET stream is open again: told the gap once, when it opens', async () => {
    dir = mkdtempSync(join(tmpdir(), 'takeback-starting-'));
    const hold = join(dir, 'hold');
    ({ hub } = await startHubOnFreePort({ servers: { m: held('legacy', hold) } }));
    const { dir: hubDir, port, url } = hub;
    await waitForReady(url, ['m']);
    const s = await subscriber(url);
    s.hold();
    writeFileSync(hold, '');
    expect(await hub.stop()).toBe(0);
    hub = await startHub({ servers: { m: held('legacy', hold) } }, { dir: hubDir, port });
    // A POST takes the session back while `m` starts (a ping: no tool of `m` is listed yet).
    expect(await s.client.ping()).toEqual({});
    await expect.poll(() => hub!.logs.some((l) => l.includes('legacy session taken back (')), { timeout: 10_000, interval: 20 }).toBe(true);
    rmSync(hold);
    await waitForReady(url, ['m']);
    // `m` holds the subscription again (its signal said while no stream was open), then the GET is back.
    await touch(s.client, 'legacy');
    expect(s.heard).toEqual([]);
    s.release();
    await expect.poll(() => s.heard, { timeout: 10_000, interval: 20 }).toEqual(['gap']);
    await touch(s.client, 'legacy');
    await expect.poll(() => s.heard.includes('touch'), { timeout: 10_000, interval: 20 }).toBe(true);
    expect(s.heard).toEqual(['gap', 'touch']);
    if (existsSync(hold)) rmSync(hold);
  }, 90_000);
});
