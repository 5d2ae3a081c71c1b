/**
 * A legacy (2025-11-25) Streamable HTTP server says its resource updates on its standalone GET
 * stream. When that stream ends and is opened again with nothing to resume from, an update said
 * while none was open is lost, though the session and its subscriptions live on: the hub tells
 * each subscribed URI's subscribers it updated once the new stream is open, once. When the stream
 * is resumed with Last-Event-ID and the server replays what it said, nothing was lost, and
 * nothing more is said. The real built hub, the SDK v1 fixture
 * test/fixtures/servers/legacy-http-subs.mjs over loopback HTTP (its close_get ends the stream
 * on the server's side), an SDK v1 subscriber (resources/subscribe) and an SDK v2 listener
 * (subscriptions/listen).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { firstText, waitForReady } from '../helpers/wire.js';

const SUBS = 'test/fixtures/servers/legacy-http-subs.mjs';
const TOLD = 'notification stream open again after a gap it could not resume';
let plain: HttpFixture;
let kept: HttpFixture;
let hub: HubProcess;
const closing: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  // `kept` keeps its events: its GET stream, ended after an event, is resumed and replayed.
  [plain, kept] = await Promise.all([startHttpFixture(SUBS, { DOC_URI: 'plain://doc,plain://other' }), startHttpFixture(SUBS, { DOC_URI: 'kept://doc,kept://other', SSE_RETRY_MS: '500' })]);
  hub = await startHub({ servers: { plain: { url: plain.url }, kept: { url: kept.url } } });
  await waitForReady(hub.url, ['plain', 'kept']);
}, 60_000);
afterEach(async () => {
  for (const close of closing.splice(0)) await close().catch(() => undefined);
});
afterAll(async () => {
  await hub?.stop();
  await plain?.stop();
  await kept?.stop();
});

/** A legacy client subscribed to `uris` and a modern one listening to them; what each heard. */
async function subscribers(uris: string[]): Promise<{ legacy: ClientV1; legacyHeard: string[]; modernHeard: string[] }> {
  const legacy = new ClientV1({ name: 'legacy-watcher', version: '1.0.0' }, { capabilities: {} });
  await legacy.connect(new TransportV1(new URL(hub.url)));
  closing.push(() => legacy.close());
  const legacyHeard: string[] = [];
  legacy.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void legacyHeard.push(n.params.uri));
  for (const uri of uris) expect(await legacy.subscribeResource({ uri })).toEqual({});
  const modern = new ClientV2({ name: 'modern-watcher', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await modern.connect(new TransportV2(new URL(hub.url)));
  closing.push(() => modern.close());
  const modernHeard: string[] = [];
  modern.setNotificationHandler('notifications/resources/updated', async (n) => void modernHeard.push(String(n.params.uri)));
  const sub = await modern.listen({ resourceSubscriptions: uris });
  closing.unshift(() => sub.close());
  expect(sub.honoredFilter.resourceSubscriptions).toEqual(uris);
  return { legacy, legacyHeard, modernHeard };
}

/** The hub's lines saying it told a gap of `server`'s stream. */
const told = (server: string) => hub.logs.filter((l) => l.includes(TOLD) && l.includes(`"server":"${server}"`)).length;
const heard = (s: { legacyHeard: string[]; modernHeard: string[] }) => ({ legacy: [...s.legacyHeard].sort(), modern: [...s.modernHeard].sort() });
const both = (uris: string[]) => ({ legacy: [...uris].sort(), modern: [...uris].sort() });

describe("a legacy HTTP server's GET stream opened again", () => {
  it('without resumption (the server keeps no events): each subscribed URI is said updated to its subscribers once the new stream is open, once', async () => {
    const s = await subscribers(['plain://doc', 'plain://other']);
    // The stream carries updates: a marker said now comes alone.
    expect(firstText(await s.legacy.callTool({ name: 'plain__touch', arguments: { uri: 'plain://doc' } }))).toBe('told 1');
    await expect.poll(() => heard(s), { timeout: 5000, interval: 20 }).toEqual(both(['plain://doc']));
    // The server ends the stream, then changes the doc while none is open: that update is lost.
    expect(firstText(await s.legacy.callTool({ name: 'plain__close_get', arguments: { uri: 'plain://doc' } }))).toBe('closed 1, told 1');
    // Once the hub's new stream is open, both URIs are said updated.
    await expect.poll(() => heard(s), { timeout: 15_000, interval: 20 }).toEqual(both(['plain://doc', 'plain://doc', 'plain://other']));
    // The new stream carries updates; the gap was told once (other has no second update before this one).
    expect(firstText(await s.legacy.callTool({ name: 'plain__touch', arguments: { uri: 'plain://doc' } }))).toBe('told 1');
    await expect.poll(() => heard(s), { timeout: 5000, interval: 20 }).toEqual(both(['plain://doc', 'plain://doc', 'plain://doc', 'plain://other']));
    expect(told('plain')).toBe(1);
  }, 60_000);

  it('resumed with Last-Event-ID (the server keeps its events): the update said in the gap is replayed, and nothing more is said', async () => {
    const s = await subscribers(['kept://doc', 'kept://other']);
    // An update on the stream gives it an event id to resume from.
    expect(firstText(await s.legacy.callTool({ name: 'kept__touch', arguments: { uri: 'kept://doc' } }))).toBe('told 1');
    await expect.poll(() => heard(s), { timeout: 5000, interval: 20 }).toEqual(both(['kept://doc']));
    expect(firstText(await s.legacy.callTool({ name: 'kept__close_get', arguments: { uri: 'kept://doc' } }))).toBe('closed 1, told 1');
    // Replayed on the resumed stream.
    await expect.poll(() => heard(s), { timeout: 15_000, interval: 20 }).toEqual(both(['kept://doc', 'kept://doc']));
    // A marker on the resumed stream: a gap's signal would have come before it (other said updated).
    expect(firstText(await s.legacy.callTool({ name: 'kept__touch', arguments: { uri: 'kept://doc' } }))).toBe('told 1');
    await expect.poll(() => heard(s), { timeout: 5000, interval: 20 }).toEqual(both(['kept://doc', 'kept://doc', 'kept://doc']));
    expect(told('kept')).toBe(0);
  }, 60_000);
});
