/**
 * What a client's own values can do to what the operator reads, through the real built hub: a
 * huge id or name is cut, in the log and on the live feed (/admin/events), as the ledger cuts
 * it, and what the ledger redacts the feed does not show.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { legacySession, LEGACY_VERSION, waitForReady } from '../helpers/wire.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { notes: nodeServer('examples/legacy-notes.mjs') } });
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
});
