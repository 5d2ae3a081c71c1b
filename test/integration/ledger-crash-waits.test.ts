/**
 * A tools/call that waits in the hub before it is forwarded (for the user's confirmation, or
 * for an earlier call with the same idempotency key) has its row from the start of that wait:
 * a daemon SIGKILLed meanwhile leaves it `unknown` (naming its server) at the next start, not
 * without any row. Real hub, SDK v1 upstream, raw HTTP for both eras.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { exportRows, fixture, inFlight, LEGACY, ledgerCli, modernCall, readCounter, SDK1, waitForReady } from './ledger-helpers.js';

let hub: HubProcess | undefined;
afterAll(async () => {
  await hub?.stop();
});

/** Reads an SSE answer stream until `text` shows up in it (the hub's request to the client). */
async function readUntil(res: Response, text: string, timeoutMs = 10_000): Promise<void> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  const deadline = Date.now() + timeoutMs;
  while (!seen.includes(text)) {
    if (Date.now() > deadline) throw new Error(`no ${text} on the stream: ${seen}`);
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended without ${text}: ${seen}`);
    seen += decoder.decode(value, { stream: true });
  }
}

describe('SIGKILL while a call waits in the hub before it is forwarded', () => {
  it('leaves the call unknown, with its server, whether it waited for the user or for its key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-ledger-waits-'));
    const db = join(dir, 'ledger.db');
    const counter = join(dir, 'counter.json');
    const config = { policy: { confirm: ['f__counter_bump'] }, servers: { f: fixture(SDK1, dir, {}, counter) } };
    hub = await startHub(config, { dir });
    await waitForReady(hub.url, ['f']);
    const url = hub.url;

    // A legacy client that can be asked: the hub asks it to confirm counter_bump, and it never answers.
    const init = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY, capabilities: { elicitation: {} }, clientInfo: { name: 'waits', version: '1' } } }),
    });
    await init.text();
    const session = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY };
    await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...session }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
    const asked = new AbortController();
    const confirming = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...session },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'confirming', method: 'tools/call', params: { name: 'f__counter_bump', arguments: { label: 'confirm' } } }),
      signal: asked.signal,
    });
    await readUntil(confirming, 'elicitation/create');

    // A keyed call in flight upstream, and the same call again, waiting for the first's answer.
    // Each sent once the one before has its row (its key claimed just before): polled, where
    // fixed waits of 300 and 500 ms were.
    const first = modernCall(url, 'first', 'tools/call', { name: 'f__slow', arguments: { ms: 20_000 } }, { headers: { 'idempotency-key': 'wait-k' } }).catch(() => undefined);
    await expect.poll(() => inFlight(db, ['first']), { timeout: 10_000, interval: 20 }).toBe(1);
    const again = modernCall(url, 'again', 'tools/call', { name: 'f__slow', arguments: { ms: 20_000 } }, { headers: { 'idempotency-key': 'wait-k' } }).catch(() => undefined);
    await expect.poll(() => inFlight(db, ['first', 'again']), { timeout: 10_000, interval: 20 }).toBe(2);

    expect(await hub.stop('SIGKILL')).toBeNull();
    asked.abort();
    await Promise.all([first, again]);

    hub = await startHub(config, { dir });
    await waitForReady(hub.url, ['f']);
    const rows = await exportRows(db);
    const row = (id: string) => rows.find((r) => r.method === 'tools/call' && r.requestId === id);
    for (const [id, tool] of [
      ['confirming', 'f__counter_bump'],
      ['first', 'f__slow'],
      ['again', 'f__slow'],
    ]) {
      expect(row(id), `the row of ${id}`).toMatchObject({ outcome: 'unknown', server: 'f', tool, errorMessage: 'the hub stopped before this call finished' });
    }
    expect(row('again')!.idempotencyKey).toBe('wait-k');
    expect(readCounter(counter).confirm).toBeUndefined(); // never confirmed, never run
    expect((await ledgerCli(db, ['verify'])).code).toBe(0);
  }, 60_000);
});
