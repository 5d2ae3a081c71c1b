/**
 * What a client's own values can do to what the operator reads, through the real built hub: a
 * huge id or name is cut, in the log and on the live feed (/admin/events), as the ledger cuts
 * it, and what the ledger redacts the feed does not show.
 */
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { legacySession, LEGACY_VERSION, waitForReady } from '../helpers/wire.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { join } from 'node:path';
import { waitForRows } from './ledger-helpers.js';

let hub: HubProcess;
const SECRET = 'feed-secret-value-4471';

beforeAll(async () => {
  // The server's env holds one of the config's secrets: the hub must never show it.
  hub = await startHub({ servers: { notes: nodeServer('examples/legacy-notes.mjs', [], { API_TOKEN: SECRET }) } });
  await waitForReady(hub.url, ['notes']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
});

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a client cannot make the log carry its values whole', () => {
  it('a malformed response with a 3,000,000-character id is one short warn line', async () => {
    const s = await legacySession(hub.url);
    const id = `huge-id-${'A'.repeat(3_000_000)}`;
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION },
      body: JSON.stringify({ jsonrpc: '2.0', id, result: 5 }),
    });
    expect(res.status).toBe(202);
    const line = await until('the warn line', () => hub.logs.find((l) => l.includes('malformed client response dropped')));
    expect(line.length).toBeLessThan(6000);
    const logged = JSON.parse(line) as { id: string; problem: string };
    expect(logged.id.startsWith('huge-id-AAAA')).toBe(true);
    expect(logged.id).toContain('more chars]');
    expect(logged.problem).toBe('result must be an object');
  });

  it('a flood of malformed responses is a few warn lines, not one per message', async () => {
    const s = await legacySession(hub.url);
    const before = hub.logs.filter((l) => l.includes('malformed client response dropped')).length;
    const headers = { 'content-type': 'application/json', 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION };
    for (let i = 0; i < 300; i += 20)
      await Promise.all(Array.from({ length: 20 }, (_, k) => fetch(hub.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: `m${i + k}`, result: 5 }) }).then((r) => expect(r.status).toBe(202))));
    await new Promise((r) => setTimeout(r, 300));
    const lines = hub.logs.filter((l) => l.includes('malformed client response dropped')).length - before;
    expect(lines).toBeGreaterThan(0);
    expect(lines).toBeLessThanOrEqual(10);
  });
});

/** A viewer of /admin/events: every audit event it got so far, and the size of the largest frame. */
async function viewer(port: number) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/admin/events`);
  const audits: Record<string, unknown>[] = [];
  let largest = 0;
  ws.on('message', (d: Buffer) => {
    largest = Math.max(largest, d.length);
    const e = JSON.parse(d.toString()) as Record<string, unknown>;
    if (e.type === 'audit') audits.push(e);
  });
  await new Promise((r, j) => ws.once('open', r).once('error', j));
  return { ws, audits, largest: () => largest };
}

describe('the live feed shows what the ledger keeps', () => {
  it("cuts a client's 2,000,000-character id and client name as the ledger does", async () => {
    const v = await viewer(hub.port);
    const init = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'I'.repeat(2_000_000), method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'N'.repeat(2_000_000), version: '1' } } }),
    });
    expect(init.status).toBe(200);
    const e = await until('the initialize event', () => v.audits.find((a) => a.method === 'initialize'));
    // As the ledger keeps it: its JSON form cut to the column's 4096 characters, `"III…"…`, that is 4093 of its characters.
    expect([(e.requestId as string).length, e.requestIdType, e.requestIdCut]).toEqual([4093, 'string', true]);
    expect((e.clientName as string).length).toBe(4096);
    expect(v.largest()).toBeLessThan(20_000);
    v.ws.close();
  });

  it("redacts the config's secret in a resource URI, as the ledger's row does", async () => {
    const v = await viewer(hub.port);
    const s = await legacySession(hub.url);
    const uri = `note://x/${SECRET}`;
    const r = await s.request(7, 'resources/read', { uri });
    expect(r.body?.error).toBeDefined(); // no such note: still a request the feed shows
    const e = await until('the resources/read event', () => v.audits.find((a) => a.method === 'resources/read'));
    expect(e.name).toBe('note://x/[redacted:config-secret]');
    expect(JSON.stringify(v.audits)).not.toContain(SECRET);
    v.ws.close();
  });
});

describe('the ledger keeps no half of a secret', () => {
  it("redacts a config secret that a 4096-character cut of a resource URI would split", async () => {
    const s = await legacySession(hub.url);
    const uri = `note://${'x'.repeat(4096 - 'note://'.length - 10)}${SECRET}`; // the secret spans the cut
    await s.request(9, 'resources/read', { uri });
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { method: 'resources/read' }, (r) => r.some((row) => String(row.tool).startsWith('note://xxxx')));
    const row = rows.find((r) => String(r.tool).startsWith('note://xxxx'))!;
    expect(String(row.tool).length).toBeLessThanOrEqual(4096);
    expect(String(row.tool)).not.toContain(SECRET.slice(0, 10));
    expect(JSON.stringify(rows)).not.toContain(SECRET.slice(0, 10));
  });
});
