/**
 * A legacy client's notifications/roots/list_changed sent before it made any call. With
 * authentication off every client is the one principal, and the legacy servers' connections are
 * told (README, Era translation). A connection no call had been on yet was taken for another
 * principal's: the change went nowhere, and a server that keeps its roots (server-filesystem
 * asks at start, when no client is there, then only on a change) never had the client's until
 * the client made a call and changed them again. Real hub, the legacy translation fixture over
 * stdio and HTTP (each notes the roots it is told), an SDK v1 client over HTTP, a raw client
 * over `switchyard stdio`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { LineClient } from '../helpers/line-client.js';
import { streamWatchingFetch, waitForReady } from '../helpers/wire.js';
import { LEGACY_FIXTURE } from '../fixtures/translation/peers.js';

const dir = mkdtempSync(join(tmpdir(), 'sy-roots-first-'));
const EVENTS = join(dir, 'events.log');
const events = (): string[] => readFileSync(EVENTS, 'utf8').split('\n').filter(Boolean);

async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms; events: ${JSON.stringify(events())}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let lh: HttpFixture;
let hub: HubProcess;

beforeAll(async () => {
  writeFileSync(EVENTS, '');
  lh = await startHttpFixture(LEGACY_FIXTURE, { SERVER_NAME: 'roots-http', EVENTS_FILE: EVENTS });
  hub = await startHub({ servers: { ls: nodeServer(LEGACY_FIXTURE, [], { SERVER_NAME: 'roots-stdio', EVENTS_FILE: EVENTS }), lh: { url: lh.url } } });
  await waitForReady(hub.url, ['ls', 'lh']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
  await lh?.stop();
});

describe("a legacy client's roots change before its first call", () => {
  it('reaches the legacy servers, stdio and HTTP, which get the client’s roots (HTTP client)', async () => {
    let asked = 0;
    const client = new ClientV1({ name: 'roots-first', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked++;
      return { roots: [{ uri: 'file:///home/first' }] };
    });
    await client.connect(new TransportV1(new URL(hub.url)));
    try {
      // Asked on its GET stream, which the SDK opens after initialize: said again until it is.
      await until('the servers ask for the roots', async () => {
        if (asked === 0) await client.sendRootsListChanged();
        return events().includes('roots roots-stdio file:///home/first') && events().includes('roots roots-http file:///home/first');
      });
    } finally {
      await client.close();
    }
  }, 30_000);

  it('reaches them over `switchyard stdio` too', async () => {
    writeFileSync(EVENTS, '');
    const config = join(dir, 'stdio.config.json');
    writeFileSync(config, JSON.stringify({ ledger: { path: join(dir, 'stdio-ledger.db') }, servers: { ls: nodeServer(LEGACY_FIXTURE, [], { SERVER_NAME: 'roots-pipe', EVENTS_FILE: EVENTS }), lh: { url: lh.url } } }));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', config], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      await c.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { roots: { listChanged: true } }, clientInfo: { name: 'roots-pipe', version: '1' } } }, 30_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      // Both servers up (a list names their tools); no call made.
      for (let i = 0; ; i++) {
        const names = ((await c.request({ jsonrpc: '2.0', id: `list-${i}`, method: 'tools/list' })).result?.tools ?? []).map((t: { name: string }) => t.name);
        if (names.includes('ls__echo') && names.includes('lh__echo')) break;
        if (i > 100) throw new Error('the servers did not come up');
        await new Promise((r) => setTimeout(r, 100));
      }
      let asked = 0;
      const answering = setInterval(() => {
        for (const m of c.received.splice(0)) if (m.method === 'roots/list') {
          asked++;
          c.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { roots: [{ uri: 'file:///home/pipe' }] } }));
        }
      }, 20);
      try {
        c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' }));
        await until('the servers ask for the roots', () => events().includes('roots roots-pipe file:///home/pipe') && events().includes('roots roots-http file:///home/pipe'));
        expect(asked).toBe(2);
      } finally {
        clearInterval(answering);
      }
    } finally {
      c.kill();
    }
  }, 60_000);
});

describe('a legacy server that asked for roots before any client could answer', () => {
  let early: HubProcess;
  let earlyLh: HttpFixture;
  beforeAll(async () => {
    writeFileSync(EVENTS, '');
    // Both ask as they are initialized (in oninitialized). Over HTTP a request outside any call
    // goes on the hub's GET stream, and the SDK server drops one sent while none is open: the
    // hub opens it before it says it is initialized (it opened it after, and the question was
    // lost, the server waiting for its answer for good).
    earlyLh = await startHttpFixture(LEGACY_FIXTURE, { SERVER_NAME: 'early-http', EVENTS_FILE: EVENTS, ROOTS_AT_START: '0' });
    early = await startHub({ servers: { ls: nodeServer(LEGACY_FIXTURE, [], { SERVER_NAME: 'early-stdio', EVENTS_FILE: EVENTS, ROOTS_AT_START: '0' }), lh: { url: earlyLh.url } } });
    await waitForReady(early.url, ['ls', 'lh']);
    // Both asked as they started, and were refused: no client was there.
    await until('both servers asked at start', () => events().some((e) => e.startsWith('roots-start early-stdio refused')) && events().some((e) => e.startsWith('roots-start early-http refused')));
  }, 60_000);
  afterAll(async () => {
    await first?.client.close();
    await early?.stop();
    await earlyLh?.stop();
  });

  /** The client that answers the servers' roots (the first test's), kept open for the second. */
  let first: { client: ClientV1; transport: TransportV1 } | undefined;

  it('is told the roots changed once a client with roots is there (its GET stream open), without the client saying so, and gets its roots', async () => {
    let asked = 0;
    const client = new ClientV1({ name: 'roots-late', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked++;
      return { roots: [{ uri: 'file:///home/late' }] };
    });
    const transport = new TransportV1(new URL(early.url));
    await client.connect(transport);
    first = { client, transport };
    await until('the servers ask the client for its roots', () => events().includes('roots early-stdio file:///home/late') && events().includes('roots early-http file:///home/late'));
    expect(asked).toBe(2);
  }, 30_000);

  it('a second client with roots tells nobody again while the first can answer', async () => {
    expect(first).toBeDefined();
    const before = events().length;
    let asked = 0;
    const client = new ClientV1({ name: 'roots-second', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked++;
      return { roots: [{ uri: 'file:///home/second' }] };
    });
    const watch = streamWatchingFetch();
    await client.connect(new TransportV1(new URL(early.url), { fetch: watch.fetch }));
    try {
      await watch.streamOpen;
      // A call through each server: had either been told, its roots/list (asked at once) came first.
      await client.callTool({ name: 'ls__echo', arguments: { text: 'x' } });
      await client.callTool({ name: 'lh__echo', arguments: { text: 'x' } });
      expect(asked).toBe(0);
      expect(events().slice(before)).toEqual([]);
    } finally {
      await client.close();
    }
  }, 30_000);

  it('once the client that answers is gone (its session ended), the next client with roots is told, and its roots replace the gone one’s', async () => {
    await first!.transport.terminateSession();
    await first!.client.close();
    let asked = 0;
    const client = new ClientV1({ name: 'roots-third', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked++;
      return { roots: [{ uri: 'file:///home/third' }] };
    });
    await client.connect(new TransportV1(new URL(early.url)));
    try {
      await until('the servers ask the new client for its roots', () => events().includes('roots early-stdio file:///home/third') && events().includes('roots early-http file:///home/third'));
      expect(asked).toBe(2);
    } finally {
      await client.close();
    }
  }, 30_000);
});

describe('a roots/list a server sends outside any call', () => {
  let claimHub: HubProcess;
  let claimLh: HttpFixture;
  beforeAll(async () => {
    writeFileSync(EVENTS, '');
    // Each says in its request's _meta that it is "github" (the key the hub names askers by).
    claimLh = await startHttpFixture(LEGACY_FIXTURE, { SERVER_NAME: 'claim-http', EVENTS_FILE: EVENTS, ROOTS_CLAIM: 'github' });
    claimHub = await startHub({
      servers: {
        ls: nodeServer(LEGACY_FIXTURE, [], { SERVER_NAME: 'claim-stdio', EVENTS_FILE: EVENTS, ROOTS_CLAIM: 'github' }),
        lh: { url: claimLh.url },
        tr: { ...nodeServer(LEGACY_FIXTURE, [], { SERVER_NAME: 'claim-trusted', EVENTS_FILE: EVENTS, ROOTS_CLAIM: 'github' }), trust: 'trusted' },
      },
    });
    await waitForReady(claimHub.url, ['ls', 'lh', 'tr']);
  }, 60_000);
  afterAll(async () => {
    await claimHub?.stop();
    await claimLh?.stop();
  });

  it("reaches the client naming the untrusted server that asks, never with that server's own claim to be another (a trusted one's as it asked)", async () => {
    const metas: Record<string, unknown>[] = [];
    const client = new ClientV1({ name: 'roots-claim', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
    client.setRequestHandler(ListRootsRequestSchema, async (req) => {
      metas.push((req.params?._meta ?? {}) as Record<string, unknown>);
      return { roots: [{ uri: 'file:///home/claim' }] };
    });
    await client.connect(new TransportV1(new URL(claimHub.url)));
    try {
      await until('the servers ask for the roots', async () => {
        if (metas.length === 0) await client.sendRootsListChanged();
        return ['claim-stdio', 'claim-http', 'claim-trusted'].every((s) => events().includes(`roots ${s} file:///home/claim`));
      });
      const said = metas.map((m) => m['dev.switchyard/server']).sort();
      // The untrusted ones are named by their ids; the trusted one (a hub behind this one names its own) as it asked.
      expect(said).toEqual(['github', 'lh', 'ls']);
      // Their other keys pass.
      for (const m of metas) expect(m['com.example/kept']).toBe('yes');
    } finally {
      await client.close();
    }
  }, 30_000);
});
