/**
 * A stdio server with processPerPrincipal whose own process is down: a principal without a
 * process of its own gets none started by a legacy resources/subscribe or a resources/read, as
 * by its list or its tools/call (hub/own-connection.ts standsAlone): the same command would most likely fail alike, a crash loop per
 * user. In-process hubs over loopback HTTP; the first (authentication off) lists the server's
 * resource, which the ledger keeps, so that the second routes the URI to it while it is down.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Hub } from '../../src/hub.js';
import { silentLogger } from '../../src/log.js';
import { sha256Hex } from '../helpers/auth.js';
import { heardSoFar, LEGACY_VERSION, modernBody, modernHeaders, post, type Json } from '../helpers/wire.js';
import { MUTABLE } from './catalog-helpers.js';
import { ROOT } from '../helpers/hub-process.js';
import { SDK1 } from './ledger-helpers.js';

const CAROL = 'sy_carol-own-process-down-key-000000000000000000';
const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

afterEach(() => void delete process.env.SWITCHYARD_STARTUP_GRACE_MS);

/** A legacy session of `key` (none: unauthenticated); its requests' answers. */
async function session(url: string, key?: string): Promise<(id: number, method: string, params?: Json) => Promise<{ body?: { result?: Json; error?: { message: string } } }>> {
  const headers = { ...JSON_HEADERS, ...(key && { authorization: `Bearer ${key}` }) };
  const init = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'c', version: '1' } } }, headers);
  const h = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  return (id, method, params = {}) => post(url, { jsonrpc: '2.0', id, method, params }, h) as never;
}

describe('a processPerPrincipal server whose own process is down', () => {
  it("a legacy resources/subscribe or a read starts no process of the principal's own: refused, as its calls are", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-own-down-'));
    const ledger = { path: join(dir, 'ledger.db') };
    const file = join(dir, 'hub.config.json');
    try {
      const first = Hub.create(parseConfig({ ledger, servers: { r: { command: process.execPath, args: [MUTABLE], env: { ERA: 'legacy', DOC_URI: 'r://doc' } } } }, file, {}), silentLogger);
      try {
        first.startUpstreams();
        const url = `http://127.0.0.1:${(await first.listen('127.0.0.1', 0)).port}/mcp`;
        const req = await session(url);
        for (const end = performance.now() + 10_000; first.health().servers[0]?.state !== 'ready' && performance.now() < end; ) await new Promise((r) => setTimeout(r, 20));
        expect(JSON.stringify((await req(1, 'resources/list')).body?.result)).toContain('r://doc');
      } finally {
        await first.stop(0);
      }
      // Its process now fails at once; each principal would have one of its own.
      process.env.SWITCHYARD_STARTUP_GRACE_MS = '0';
      const r = { command: process.execPath, args: ['-e', 'process.exit(1)'], processPerPrincipal: true, timeoutMs: 300 };
      const hub = Hub.create(parseConfig({ ledger, auth: { apiKeys: [{ principal: 'carol', sha256: sha256Hex(CAROL) }] }, servers: { r } }, file, {}), silentLogger);
      try {
        hub.startUpstreams();
        const url = `http://127.0.0.1:${(await hub.listen('127.0.0.1', 0)).port}/mcp`;
        const req = await session(url, CAROL);
        // A read is refused as its server is down; before, carol's process was started first.
        expect((await req(1, 'resources/read', { uri: 'r://doc' })).body?.error?.message).toMatch(/server "r" is (restarting|starting|failed)/);
        expect(hub.upstreams.size).toBe(0);
        const sub = await req(2, 'resources/subscribe', { uri: 'r://doc' });
        // Before, carol's own process was started (and failed alike), and the subscribe answered {}.
        expect(sub.body?.error?.message).toMatch(/server "r" is (restarting|starting|failed)/);
        expect(hub.upstreams.size).toBe(0);
        // Nor is it honoured in a modern listen stream (it was, held on the server's process).
        const ac = new AbortController();
        const res = await fetch(url, {
          method: 'POST',
          headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${CAROL}` },
          body: JSON.stringify(modernBody('l-down', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['r://doc'], toolsListChanged: true } })),
          signal: ac.signal,
        });
        const heard = heardSoFar(res);
        try {
          await expect.poll(() => heard().includes('acknowledged'), { timeout: 5_000 }).toBe(true);
          const ack = JSON.parse(heard().split('\n').find((l) => l.startsWith('data:') && l.includes('acknowledged'))!.slice(5)) as { params: { notifications: Json } };
          expect(ack.params.notifications).toEqual({ toolsListChanged: true });
        } finally {
          ac.abort();
        }
        expect(hub.upstreams.size).toBe(0);
      } finally {
        await hub.stop(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 20_000);

  it("an unsubscribe after `servers restart` closed the principal's own process starts none to say it upstream: nothing holds it there", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-own-release-'));
    const r = { command: process.execPath, args: [MUTABLE], env: { ERA: 'legacy', DOC_URI: 'r://doc' }, processPerPrincipal: true };
    const hub = Hub.create(parseConfig({ ledger: { path: join(dir, 'ledger.db') }, auth: { apiKeys: [{ principal: 'carol', sha256: sha256Hex(CAROL) }] }, servers: { r } }, join(dir, 'hub.config.json'), {}), silentLogger);
    const ready = async (): Promise<void> => {
      for (const end = performance.now() + 10_000; hub.health().servers[0]?.state !== 'ready'; await new Promise((res) => setTimeout(res, 20)))
        if (performance.now() > end) throw new Error('server r never ready');
    };
    try {
      hub.startUpstreams();
      const url = `http://127.0.0.1:${(await hub.listen('127.0.0.1', 0)).port}/mcp`;
      await ready();
      const req = await session(url, CAROL);
      // Made on carol's own process (started for it).
      expect((await req(1, 'resources/subscribe', { uri: 'r://doc' })).body?.result).toEqual({});
      expect(hub.upstreams.size).toBe(1);
      // Her process is closed with the server's (the pool forgets it); her subscription is kept, made again on her next process.
      hub.restartServer('r');
      expect(hub.upstreams.size).toBe(0);
      await ready();
      // Before, the unsubscribe started her a process, only to unsubscribe from what it never held.
      expect((await req(2, 'resources/unsubscribe', { uri: 'r://doc' })).body?.result).toEqual({});
      expect(hub.upstreams.size).toBe(0);
    } finally {
      await hub.stop(0);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 20_000);
});

describe('the stop of a hub with a processPerPrincipal server', () => {
  // The principals' own processes were closed only once every server's own connection had
  // closed: a call on one was answered 2 s and more after the drain time, the time a server
  // that ignores the end of its stdin (a call in flight keeps the SDK server up) takes to exit.
  it("closes the principals' own processes alongside the servers' own: their calls are answered as the drain time ends", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-own-stop-'));
    const sdk = { command: process.execPath, args: [join(ROOT, SDK1)] };
    const config = { ledger: { path: join(dir, 'ledger.db') }, auth: { apiKeys: [{ principal: 'carol', sha256: sha256Hex(CAROL) }] }, servers: { s: sdk, p: { ...sdk, processPerPrincipal: true } } };
    const hub = Hub.create(parseConfig(config, join(dir, 'hub.config.json'), {}), silentLogger);
    let stopped: Promise<void> | undefined;
    try {
      hub.startUpstreams();
      const url = `http://127.0.0.1:${(await hub.listen('127.0.0.1', 0)).port}/mcp`;
      await expect.poll(() => hub.health().servers.every((x) => x.state === 'ready'), { timeout: 10_000 }).toBe(true);
      const call = (name: string) => post(url, modernBody(name, 'tools/call', { name, arguments: { ms: 20_000 } }), { ...modernHeaders('tools/call', name), authorization: `Bearer ${CAROL}` });
      // One on the server's own process (shared), one on carol's own.
      const shared = call('s__slow');
      const own = call('p__slow');
      const p = hub.handles.get('p')!;
      await expect.poll(() => hub.handles.get('s')!.upstream.load.active === 1 && hub.upstreams.existing(p, 'carol')?.load.active === 1, { timeout: 10_000 }).toBe(true);
      // When the server's own connection to `s` has closed (its process exited).
      const s = hub.handles.get('s')!.upstream;
      let sClosed = false;
      const close = s.close.bind(s);
      s.close = () => close().finally(() => void (sClosed = true));
      stopped = hub.stop(100);
      const answer = await own;
      expect(sClosed, 'answered only once the server connections had closed').toBe(false);
      expect(JSON.stringify(answer.body)).toMatch(/was closed/);
      expect(JSON.stringify((await shared).body)).toMatch(/was closed/);
    } finally {
      await (stopped ?? hub.stop(0));
      rmSync(dir, { recursive: true, force: true });
    }
  }, 20_000);
});
