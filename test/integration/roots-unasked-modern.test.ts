/**
 * server-everything (npm, legacy, stdio) asks for roots on its own: as it starts, and whenever a
 * client says its roots changed. Over stdio nothing says which call such a request is about, so
 * the hub puts it to the call in flight. When that call is a 2026-07-28 client's that declared
 * no roots, the server hears what a legacy client without roots answers (-32601), as on a
 * direct connection, and the call goes on: it ended -32021 (roots required) however little it
 * had to do with roots, its user's answers to its own question thrown away.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';

const EVERYTHING = join(ROOT, 'node_modules/.bin/mcp-server-everything');

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { ev: { command: EVERYTHING, args: ['stdio'] } }, ledger: { enabled: false } });
  await waitForReady(hub.url, ['ev'], 30_000);
}, 60_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
});

const until = async (ok: () => boolean, what: string): Promise<void> => {
  const end = Date.now() + 15_000;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

it("goes on with a modern client's call when the server asks for roots while it runs, and the server hears -32601", async () => {
  // A legacy client with roots, which the server asks once told they changed (with no call in
  // flight): told again until its notification stream is open and the ask can reach it.
  let rootsAsked = 0;
  const legacy = new ClientV1({ name: 'roots-owner', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
  legacy.setRequestHandler(ListRootsRequestSchema, async () => (rootsAsked++, { roots: [{ uri: 'file:///projects/roots-owner', name: 'r' }] }));
  await legacy.connect(new TransportV1(new URL(hub.url)));

  // A modern client with elicitation, no roots; its answer waits until the server has asked for roots.
  const modern = new ClientV2({ name: 'no-roots', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } } });
  let asked!: () => void;
  const questionCame = new Promise<void>((resolve) => (asked = resolve));
  let release!: () => void;
  const answerNow = new Promise<void>((resolve) => (release = resolve));
  modern.setRequestHandler('elicitation/create', async () => {
    asked();
    await answerNow;
    return { action: 'accept', content: { color: 'teal', number: 7, pets: 'cats' } };
  });
  await modern.connect(new TransportV2(new URL(hub.url)));
  try {
    expect(modern.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    for (let i = 0; i < 30 && rootsAsked === 0; i++) {
      await legacy.sendRootsListChanged();
      const end = Date.now() + 500;
      while (rootsAsked === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    }
    expect(rootsAsked).toBeGreaterThan(0);
    const call = modern.callTool({ name: 'ev__trigger-elicitation-request', arguments: {} }, { timeout: 30_000 });
    await questionCame; // the call is parked at the hub, its server waiting for the answer
    const before = rootsAsked;
    // The server asks for roots again, outside anything of the legacy client's: the modern call
    // is the one in flight.
    const stderrMark = hub.logs.length;
    await legacy.sendRootsListChanged();
    await until(() => hub.logs.slice(stderrMark).some((l) => l.includes('Failed to request roots')), "the server's roots/list to be answered");
    expect(hub.logs.slice(stderrMark).find((l) => l.includes('Failed to request roots'))).toContain('-32601');
    expect(rootsAsked).toBe(before); // not put to the legacy client either: it was the modern call's
    release();
    const result = await call;
    expect(result.isError).not.toBe(true);
    expect((result.content as { text: string }[]).map((c) => c.text).join('\n')).toMatch(/Favorite Color: teal[\s\S]*Favorite Number: 7/);
  } finally {
    release();
    await modern.close();
    await legacy.close();
  }
}, 60_000);
