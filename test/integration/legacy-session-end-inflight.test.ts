/**
 * A legacy session that ends while one of its requests is in flight (its client's DELETE, or a
 * reload that revokes the API key that opened it) still answers that request: 202 is for
 * notifications and responses, and an SDK client that gets it for a request waits for an answer
 * until its own timeout. The request is answered as any request naming an ended session is
 * (404, -32001), saying why when the hub ended it (the key revoked, its group removed), and the call upstream is
 * cancelled. Real built hub and CLI, SDK v1 client and server.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { runCli } from '../helpers/cli.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { waitForReady } from '../helpers/wire.js';
import { queryRows, SDK1 } from './ledger-helpers.js';

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({ servers: { s: nodeServer(SDK1) } });
  await waitForReady(hub.url, ['s']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a legacy session ended under a request in flight', () => {
  it('answers the request with Session not found at once, and cancels the call', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(hub.url));
    const client = new Client({ name: 'ends-its-session', version: '1' });
    await client.connect(transport);
    try {
      const t0 = Date.now();
      const call = client.callTool({ name: 's__slow', arguments: { ms: 8000 } }, undefined, { timeout: 30_000 }).then(
        () => 'answered',
        (err: Error) => err.message,
      );
      await sleep(500);
      await transport.terminateSession();
      const outcome = await call;
      const took = Date.now() - t0;
      expect(took, outcome).toBeLessThan(5_000);
      expect(outcome).toMatch(/404|Session not found/);
      await expect
        .poll(async () => (await queryRows(join(hub.dir, 'ledger.db'))).find((r) => r.method === 'tools/call' && r.clientName === 'ends-its-session')?.outcome, { timeout: 5_000 })
        .toBe('cancelled');
    } finally {
      await client.close();
    }
  }, 40_000);
});

describe('a legacy session whose API key a reload revokes under a request in flight', () => {
  const KEY = 'sy_alice-inflight-revoked-0123456789abcdefghijklmn';
  let keyed: HubProcess | undefined;
  afterAll(async () => void (await keyed?.stop()));

  it('answers the request -32001 saying the key was revoked, and records the call cancelled so', async () => {
    keyed = await startHub({ auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(KEY) }] }, servers: { s: nodeServer(SDK1) } });
    const h = keyed;
    await waitForReadyWith(h.url, ['s'], KEY);
    const client = new Client({ name: 'key-revoked', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(h.url), { requestInit: { headers: { authorization: `Bearer ${KEY}` } } }));
    try {
      // The SDK's StreamableHTTPError carries the HTTP status as its code.
      const call = client.callTool({ name: 's__slow', arguments: { ms: 8000 } }, undefined, { timeout: 30_000 }).then(
        () => 'answered',
        (err: Error & { code?: number }) => `${err.code} ${err.message}`,
      );
      const db = join(h.dir, 'ledger.db');
      // Its row is written as it begins: the call is in flight.
      await expect.poll(async () => (await queryRows(db)).some((r) => r.method === 'tools/call' && r.clientName === 'key-revoked'), { timeout: 10_000 }).toBe(true);
      const removed = await runCli(['keys', 'remove', 'alice', '--config', h.configFile]);
      expect(removed.code, removed.stderr).toBe(0);
      await loggedTimes(h, 'config reloaded', 1);
      const why = 'Session not found: the client session ended while the request was in flight: the API key that opened it was revoked';
      const outcome = await call;
      expect(outcome).toMatch(/^404 /);
      expect(outcome).toContain(JSON.stringify({ code: -32001, message: why }).slice(1, -1));
      await expect
        .poll(async () => (await queryRows(db)).filter((r) => r.method === 'tools/call' && r.clientName === 'key-revoked').map((r) => [r.outcome, r.errorMessage]), { timeout: 5_000 })
        .toEqual([['cancelled', why.replace('Session not found: ', '')]]);
    } finally {
      await client.close().catch(() => undefined);
    }
  }, 40_000);
});

describe("a legacy session whose group a reload removes under a request in flight", () => {
  let grouped: HubProcess | undefined;
  afterAll(async () => void (await grouped?.stop()));

  it('answers the request -32001 saying its group was removed, and records the call cancelled so', async () => {
    grouped = await startHub({ groups: { g: { servers: ['s'] } }, servers: { s: nodeServer(SDK1) } });
    const h = grouped;
    await waitForReady(h.url, ['s']);
    const client = new Client({ name: 'group-removed', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(h.url.replace(/\/mcp$/, '/mcp/g'))));
    try {
      const call = client.callTool({ name: 's__slow', arguments: { ms: 8000 } }, undefined, { timeout: 30_000 }).then(
        () => 'answered',
        (err: Error & { code?: number }) => `${err.code} ${err.message}`,
      );
      const db = join(h.dir, 'ledger.db');
      await expect.poll(async () => (await queryRows(db)).some((r) => r.method === 'tools/call' && r.clientName === 'group-removed'), { timeout: 10_000 }).toBe(true);
      setSection(h, 'groups', undefined);
      await loggedTimes(h, 'config reload: groups replaced', 1);
      const why = 'Session not found: the client session ended while the request was in flight: the group it was opened on (/mcp/g) was removed';
      const outcome = await call;
      expect(outcome).toMatch(/^404 /);
      expect(outcome).toContain(JSON.stringify({ code: -32001, message: why }).slice(1, -1));
      await expect
        .poll(async () => (await queryRows(db)).filter((r) => r.method === 'tools/call' && r.clientName === 'group-removed').map((r) => [r.outcome, r.errorMessage]), { timeout: 5_000 })
        .toEqual([['cancelled', why.replace('Session not found: ', '')]]);
    } finally {
      await client.close().catch(() => undefined);
    }
  }, 40_000);
});
