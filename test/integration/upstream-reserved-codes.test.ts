/**
 * An upstream's JSON-RPC error whose code the 2026 spec reserves (-32020…-32099) is not passed
 * to a modern client as it is (digest §1.3): its -32020/-32022 concern the request the hub
 * sent, an undefined one must not be emitted; both become -32603 naming the upstream's code.
 * Its -32021 (a capability the client did not declare) is the client's business and passes.
 * Legacy clients get every code as the upstream said it. The ledger records what its client got
 * (a modern client's -32603, its message naming the upstream's code; a legacy client's the
 * upstream's own), so `ledger query` shows what the client saw; a replay by idempotency key
 * answers as the first call did, and its row says so too. Real hub, a raw legacy stdio
 * upstream (test/fixtures/quirks/reserved-codes.mjs), raw HTTP.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernBody, modernHeaders, post, waitForReady } from '../helpers/wire.js';

describe('reserved error codes from an upstream', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ servers: { q: nodeServer('test/fixtures/quirks/reserved-codes.mjs') } });
    await waitForReady(hub.url, ['q']);
  });
  afterAll(async () => void (await hub?.stop()));

  const fail = (id: string, code: number, headers: Record<string, string> = {}) =>
    post(hub.url, modernBody(id, 'tools/call', { name: 'q__fail', arguments: { code } }), { ...modernHeaders('tools/call', 'q__fail'), ...headers });

  it('a modern client gets -32603 for an upstream -32022, -32020 or undefined reserved code, and -32021 as it is', async () => {
    for (const code of [-32022, -32020, -32050, -32099]) {
      const r = await fail(`m${code}`, code);
      expect(r.status, String(code)).toBe(200);
      expect(r.body?.error).toEqual({ code: -32603, message: `the upstream answered ${code}: failed with ${code}`, data: { detail: 'kept' } });
    }
    const cap = await fail('m-32021', -32021);
    expect(cap.status).toBe(400);
    expect(cap.body?.error).toMatchObject({ code: -32021, message: 'failed with -32021' });
    // Outside the reserved range: as the upstream said it.
    for (const code of [-32000, -32019, -32100, 42]) expect((await fail(`m${code}`, code)).body?.error?.code).toBe(code);
  });

  // The row kept the upstream's -32022 while the modern client got -32603: `ledger query` showed
  // an error no client saw (and a -32022 that reads as the client's own version refused).
  it('a legacy client gets the upstream code; each row has the code its client got, the upstream\'s in the message; a replay answers as the first call did', async () => {
    const s = await legacySession(hub.url);
    const r = await s.request(1, 'tools/call', { name: 'q__fail', arguments: { code: -32050 } });
    expect(r.body?.error).toMatchObject({ code: -32050, message: 'failed with -32050' });

    const first = await fail('idem-1', -32022, { 'idempotency-key': 'reserved-k' });
    const replay = await fail('idem-2', -32022, { 'idempotency-key': 'reserved-k' });
    expect(replay.body?.error).toEqual(first.body?.error);
    expect(replay.body?.error?.code).toBe(-32603);

    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
    try {
      await expect
        .poll(
          () =>
            db
              .prepare("SELECT request_id AS id, outcome, error_code AS code, error_message AS message FROM audit WHERE method = 'tools/call' AND request_id IN ('m-32022', 'm-32050', 'm-32021', 'idem-1', 'idem-2', '1') ORDER BY request_id")
              .all(),
          { timeout: 5_000 },
        )
        .toEqual([
          { id: '1', outcome: 'rpc_error', code: -32050, message: 'failed with -32050' }, // legacy: as the upstream said it
          { id: 'idem-1', outcome: 'rpc_error', code: -32603, message: 'the upstream answered -32022: failed with -32022' },
          { id: 'idem-2', outcome: 'replayed', code: -32603, message: 'the upstream answered -32022: failed with -32022' }, // the kept error, replayed
          { id: 'm-32021', outcome: 'rpc_error', code: -32021, message: 'failed with -32021' },
          { id: 'm-32022', outcome: 'rpc_error', code: -32603, message: 'the upstream answered -32022: failed with -32022' },
          { id: 'm-32050', outcome: 'rpc_error', code: -32603, message: 'the upstream answered -32050: failed with -32050' },
        ]);
    } finally {
      db.close();
    }
  });
});
