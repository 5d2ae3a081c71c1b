/**
 * A 2026-07-28 client's `subscriptions/listen` that reaches a hub while its servers are still
 * starting (a client that kept the hub's discover result, as SDK v2's `connect({ prior })` lets
 * it, reconnecting as the hub restarts; an IDE spawning `switchyard stdio`): its
 * resourceSubscriptions wait for the start-up grace, as a read or a legacy session's subscribe
 * does, and are honoured by the servers once ready. Routed at once, a URI of a server the hub
 * had never seen ready routed nowhere: the acknowledgement left it out, and the client heard no
 * update of it for as long as the stream lasted.
 *
 * Real peers: the raw stdio fixture mutable-server.mjs of each era, started a second late
 * (start-delay.mjs), and the SDK v2 client over HTTP and over stdio.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { BIN, ROOT, nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const OLD = 'old://doc';
const NEW = 'new://doc';
const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close().catch(() => undefined);
});

/** Both servers, each starting 1.5 s late (the hub listens meanwhile); no ledger: nothing of them known. */
function config(): Record<string, unknown> {
  const late = (era: string, uri: string) => {
    const s = nodeServer(MUTABLE, [], { ERA: era, DOC_URI: uri, START_DELAY_MS: '1500' });
    return { ...s, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(s.args as string[])] };
  };
  return { ledger: { enabled: false }, servers: { old: late('legacy', OLD), new: late('modern', NEW) } };
}

/** The hub's discover result, as a client keeps it from an earlier connection. */
async function keptDiscover(): Promise<NonNullable<ReturnType<ClientV2['getDiscoverResult']>>> {
  const hub = await startHub(config());
  try {
    await waitForReady(hub.url, ['old', 'new']);
    const c = new ClientV2({ name: 'earlier', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await c.connect(new TransportV2(new URL(hub.url)));
    const discover = c.getDiscoverResult();
    await c.close();
    expect(discover?.capabilities.resources).toMatchObject({ subscribe: true });
    return discover!;
  } finally {
    await hub.stop();
  }
}

/** Listens to both URIs at once, then has each server say its resource changed: what the client heard. */
async function listenedAtStart(client: ClientV2): Promise<{ honoured: unknown; heard: string[] }> {
  const heard: string[] = [];
  client.setNotificationHandler('notifications/resources/updated', async (n) => void heard.push(String(n.params.uri)));
  const sub = await client.listen({ resourceSubscriptions: [OLD, NEW] });
  closing.unshift(() => sub.close());
  await client.callTool({ name: 'old__touch', arguments: { uri: OLD } });
  await client.callTool({ name: 'new__touch', arguments: { uri: NEW } });
  await expect.poll(() => heard.length, { timeout: 10_000, interval: 20 }).toBeGreaterThanOrEqual(2);
  return { honoured: sub.honoredFilter.resourceSubscriptions, heard: [...heard].sort() };
}

it('over HTTP: a listen stream opened as the hub starts has its resource subscriptions honoured, and hears their updates', async () => {
  const discover = await keptDiscover();
  const hub: HubProcess = await startHub(config());
  closing.push(() => hub.stop());
  const client = new ClientV2({ name: 'at-start', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await client.connect(new TransportV2(new URL(hub.url)), { prior: { kind: 'modern', discover } });
  closing.unshift(() => client.close());
  expect(await listenedAtStart(client)).toEqual({ honoured: [OLD, NEW], heard: [NEW, OLD] });
}, 60_000);

it('over stdio (switchyard stdio): the same, from its first line', async () => {
  const discover = await keptDiscover();
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-listen-start-'));
  const file = join(dir, 'hub.config.json');
  writeFileSync(file, JSON.stringify(config()));
  const client = new ClientV2({ name: 'at-start-stdio', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [BIN, 'stdio', '--config', file], cwd: dir, stderr: 'ignore' }), { prior: { kind: 'modern', discover } });
  closing.unshift(() => client.close());
  expect(await listenedAtStart(client)).toEqual({ honoured: [OLD, NEW], heard: [NEW, OLD] });
}, 60_000);
