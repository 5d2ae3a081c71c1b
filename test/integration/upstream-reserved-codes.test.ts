/**
 * An upstream's JSON-RPC error whose code the 2026 spec reserves (-32020…-32099) is not passed
 * to a modern client as it is (digest §1.3): its -32020/-32022 concern the request the hub
 * sent, an undefined one must not be emitted; both become -32603 naming the upstream's code.
 * Its -32021 (a capability the client did not declare) is the client's business and passes.
 * Legacy clients get -32020 and -32022 so too (the SDK v2 client, in legacy mode, reads a -32022
 * as its own version refused), every other code as the upstream said it. The ledger records what
 * its client got (-32603, its message naming the upstream's code; a legacy client's other codes
 * the upstream's own), so `ledger query` shows what the client saw; a replay by idempotency key
 * answers as the first call did, mapped for the era of the client it answers, and its row says
 * so too. Real hub, a raw legacy stdio upstream (test/fixtures/quirks/reserved-codes.mjs), a raw
 * modern one (quirks/modern.mjs, QUIRK_FAIL), raw HTTP and the SDK v2 client.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Client as ClientV2, ProtocolError, StreamableHTTPClientTransport as TransportV2, UnsupportedProtocolVersionError } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernBody, modernHeaders, post, waitForReady } from '../helpers/wire.js';

describe('reserved error codes from an upstream', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({
      servers: {
        q: nodeServer('test/fixtures/quirks/reserved-codes.mjs'),
        m: nodeServer('test/fixtures/quirks/modern.mjs', [], { QUIRK_FAIL: '1' }),
      },
    });
    await waitForReady(hub.url, ['q', 'm']);
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

  // JSON-RPC's code is an integer: an upstream's 1.5 or 1e300 was passed on as it came, so the
  // hub itself answered its client with an error no peer should send (an SDK refuses to read it).
  it('an upstream error code that is no integer reaches a client, modern or legacy, as -32603 with its message', async () => {
    for (const code of [1.5, 1e300, -32600.5]) {
      const r = await fail(`frac${code}`, code);
      expect(r.body?.error, String(code)).toEqual({ code: -32603, message: `failed with ${code}`, data: { detail: 'kept' } });
    }
    const s = await legacySession(hub.url);
    const old = await s.request(9, 'tools/call', { name: 'q__fail', arguments: { code: 2.5 } });
    expect(old.body?.error).toMatchObject({ code: -32603, message: 'failed with 2.5' });
  });

  // An upstream's -32601 reached a modern HTTP client with 200, where the 2026 transport answers
  // every -32601 with 404 (digest §6.3), as the hub does its own (a family no server offers).
  it('an upstream -32601 reaches a modern HTTP client as it is, with HTTP 404; a legacy one in-band', async () => {
    const r = await fail('m-32601', -32601);
    expect(r.status).toBe(404);
    expect(r.body?.error).toEqual({ code: -32601, message: 'failed with -32601', data: { detail: 'kept' } });
    const s = await legacySession(hub.url);
    const old = await s.request(2, 'tools/call', { name: 'q__fail', arguments: { code: -32601 } });
    expect(old.status).toBe(200);
    expect(old.body?.error).toMatchObject({ code: -32601, message: 'failed with -32601' });
  });

  // A modern upstream's -32021 for a request other than tools/call reached a legacy client, whose
  // era has no such code, as -32601: the client read it as its own method not found, for a
  // method the hub offers. Now -32603 naming the upstream's error, as its -32020/-32022 are.
  it('an upstream -32021 of a prompts/get or a completion reaches a legacy client as -32603 naming it, not -32601 nor -32021', async () => {
    const s = await legacySession(hub.url);
    const r = await s.request(3, 'prompts/get', { name: 'm__fail', arguments: { code: '-32021' } });
    expect(r.status).toBe(200);
    expect(r.body?.error).toEqual({
      code: -32603,
      message: 'the upstream needs a client capability this client did not declare (the upstream answered -32021: failed with -32021)',
      data: { detail: 'kept' },
    });
    const other = await s.request(4, 'prompts/get', { name: 'm__fail', arguments: { code: '-32022' } });
    expect(other.body?.error).toMatchObject({ code: -32603, message: 'the upstream answered -32022: failed with -32022' });
    // A request without input rounds (a completion) too: it reached the client as -32021.
    const completion = await s.request(5, 'completion/complete', { ref: { type: 'ref/prompt', name: 'm__fail' }, argument: { name: 'code', value: '-32021' } });
    expect(completion.body?.error).toEqual({ code: -32603, message: 'the upstream answered -32021: failed with -32021', data: { detail: 'kept' } });
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

  // A modern upstream's -32022 (or -32020) reached a legacy client as it was: the SDK v2 client
  // (legacy mode, its default) made it an UnsupportedProtocolVersionError, blaming the client's
  // own version for what the upstream said of the hub's request. A replay by idempotency key
  // to a legacy client gave the kept error as the upstream said it, whoever the first caller was.
  it('a legacy SDK v2 client gets -32603 naming the upstream\'s -32022 or -32020 of a modern upstream; so does a replay', async () => {
    const v2 = new ClientV2({ name: 'reserved-legacy', version: '1.0.0' });
    await v2.connect(new TransportV2(new URL(hub.url)));
    const KEY = 'dev.switchyard/idempotency-key';
    const refused = async (code: number, key?: string): Promise<ProtocolError> => {
      const data = code === -32022 ? { supported: ['2026-07-28'], requested: '2026-07-28' } : undefined;
      const err = await v2.callTool({ name: 'm__fail', arguments: { code, ...(data ? { data } : {}) }, ...(key ? { _meta: { [KEY]: key } } : {}) }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, String(code)).toBeInstanceOf(ProtocolError);
      return err as ProtocolError;
    };
    try {
      for (const code of [-32022, -32020]) {
        const err = await refused(code);
        expect(err).not.toBeInstanceOf(UnsupportedProtocolVersionError);
        expect(err.code).toBe(-32603);
        expect(err.message).toContain(`the upstream answered ${code}: failed with ${code}`);
      }

      // Kept by a legacy call, replayed to it; kept by a modern call, replayed to the legacy client.
      for (const attempt of ['first', 'replayed']) {
        const err = await refused(-32022, 'reserved-legacy-k');
        expect(err.code, attempt).toBe(-32603);
        expect(err.message).toContain('the upstream answered -32022: failed with -32022');
      }
      const args = { code: -32022, data: { supported: ['2026-07-28'], requested: '2026-07-28' } };
      const modern = await post(hub.url, modernBody('idem-m', 'tools/call', { name: 'm__fail', arguments: args }), {
        ...modernHeaders('tools/call', 'm__fail'),
        'idempotency-key': 'reserved-modern-k',
      });
      expect(modern.body?.error?.code).toBe(-32603);
      const replayed = await refused(-32022, 'reserved-modern-k');
      expect(replayed).not.toBeInstanceOf(UnsupportedProtocolVersionError);
      expect(replayed.code).toBe(-32603);
      expect(replayed.message).toContain('the upstream answered -32022: failed with -32022');
    } finally {
      await v2.close();
    }

    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
    try {
      await expect
        .poll(
          () =>
            db
              .prepare("SELECT outcome, error_code AS code FROM audit WHERE method = 'tools/call' AND idempotency_key IN ('reserved-legacy-k', 'reserved-modern-k') ORDER BY id")
              .all(),
          { timeout: 5_000 },
        )
        .toEqual([
          { outcome: 'rpc_error', code: -32603 },
          { outcome: 'replayed', code: -32603 },
          { outcome: 'rpc_error', code: -32603 },
          { outcome: 'replayed', code: -32603 },
        ]);
    } finally {
      db.close();
    }
  });
  // An answer kept before kept errors were marked as the upstream's (`upstream: true`) was
  // replayed as the hub's own: its -32022 reached a legacy client (the SDK v2 client read it as
  // its own version refused) and a modern one (with HTTP 400) as it was kept.
  it("replays an upstream's error kept without the mark (an older hub's row) mapped for each era", async () => {
    const args = { code: -32022, data: { supported: ['2026-07-28'], requested: '2026-07-28' } };
    const call = (id: string, key: string) =>
      post(hub.url, modernBody(id, 'tools/call', { name: 'm__fail', arguments: args }), { ...modernHeaders('tools/call', 'm__fail'), 'idempotency-key': key });
    expect((await call('idem-seed', 'reserved-seed-k')).body?.error?.code).toBe(-32603);
    const db = new Database(join(hub.dir, 'ledger.db'));
    try {
      db.pragma('busy_timeout = 5000');
      // The row that call kept: its owner and arguments' digest, for a row as an older hub kept it.
      const like = await vi.waitFor(
        () => {
          const r = db.prepare("SELECT principal, tool_group, tool, args_hash FROM idempotency WHERE key = 'reserved-seed-k' AND state = 'done'").get() as Record<string, unknown> | undefined;
          if (!r) throw new Error('not kept yet');
          return r;
        },
        { timeout: 10_000 },
      );
      const answer = { error: { code: -32022, message: 'failed with -32022', data: { supported: ['2026-07-28'], requested: '2026-07-28' } } };
      db.prepare(
        "INSERT INTO idempotency (principal, tool_group, key, tool, args_hash, state, answer_json, created_ms, completed_ms) VALUES (@principal, @tool_group, 'reserved-old-k', @tool, @args_hash, 'done', @answer, @now, @now)",
      ).run({ ...like, answer: JSON.stringify(answer), now: Date.now() });
    } finally {
      db.close();
    }
    const s = await legacySession(hub.url);
    const old = await s.request(5, 'tools/call', { name: 'm__fail', arguments: args, _meta: { 'dev.switchyard/idempotency-key': 'reserved-old-k' } });
    expect(old.body?.error).toMatchObject({ code: -32603, message: 'the upstream answered -32022: failed with -32022' });
    const modern = await call('idem-old', 'reserved-old-k');
    expect(modern.status).toBe(200);
    expect(modern.body?.error).toMatchObject({ code: -32603, message: 'the upstream answered -32022: failed with -32022' });
  });
});
