/**
 * Two real clients watching one resource through a hub: the SDK v1 client subscribed to it
 * (resources/subscribe, a legacy session) and the SDK v2 client listening to it
 * (subscriptions/listen, modern), each recording the URIs it is told updated. Their closes go
 * into `closing`, for the test's afterEach.
 */
import { expect } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

export interface ResourceWatchers {
  legacy: ClientV1;
  modern: ClientV2;
  sub: Awaited<ReturnType<ClientV2['listen']>>;
  legacyHeard: string[];
  modernHeard: string[];
  /** How many updates each has heard: [legacy, modern]. */
  heard(): [number, number];
}

export async function resourceWatchers(url: string, uri: string, closing: (() => Promise<unknown>)[]): Promise<ResourceWatchers> {
  const legacy = new ClientV1({ name: 'legacy-watcher', version: '1.0.0' }, { capabilities: {} });
  await legacy.connect(new TransportV1(new URL(url)));
  closing.push(() => legacy.close());
  const legacyHeard: string[] = [];
  legacy.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void legacyHeard.push(n.params.uri));
  await legacy.listResources();
  expect(await legacy.subscribeResource({ uri })).toEqual({});
  const modern = new ClientV2({ name: 'modern-watcher', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await modern.connect(new TransportV2(new URL(url)));
  closing.push(() => modern.close());
  const modernHeard: string[] = [];
  modern.setNotificationHandler('notifications/resources/updated', async (n) => void modernHeard.push(String(n.params.uri)));
  const sub = await modern.listen({ resourceSubscriptions: [uri] });
  closing.unshift(() => sub.close());
  expect(sub.honoredFilter.resourceSubscriptions).toEqual([uri]);
  return { legacy, modern, sub, legacyHeard, modernHeard, heard: () => [legacyHeard.length, modernHeard.length] };
}
