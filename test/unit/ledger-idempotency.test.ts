import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { argsHash } from '../../src/ledger/canonical.js';
import { IdempotencyAbandonedError, IdempotencyUnknownError } from '../../src/ledger/idempotency.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { loadMigrations, migrate } from '../../src/ledger/migrate.js';
import type { IdempotencyClaim, StoredAnswer } from '../../src/ledger/types.js';
import { closeAndRemove, tempDir } from './ledger-helpers.js';

let t: ReturnType<typeof tempDir>;
let ledger: Ledger | undefined;
// A ledger closed twice, or a folder removed twice, is no harm.
afterEach(() => closeAndRemove(ledger, t));

const H1 = argsHash({ path: '/a' });
const H2 = argsHash({ path: '/b' });
const ANSWER: StoredAnswer = { result: { content: [{ type: 'text', text: 'done' }] } };

function open(opts: { now?: () => number; ttl?: number } = {}): Ledger {
  ledger = Ledger.open({ path: t.db, now: opts.now, idempotencyTtlMs: opts.ttl });
  return ledger;
}

function dbState(key: string, principal = 'alice'): string | undefined {
  const db = new Database(t.db, { readonly: true });
  const row = db.prepare('SELECT state FROM idempotency WHERE principal = ? AND key = ?').get(principal, key) as { state: string } | undefined;
  db.close();
  return row?.state;
}

describe('ledger idempotency keys', () => {
  it('new, then replay of the stored answer, also after a restart', async () => {
    t = tempDir();
    const l = open();
    expect(l.idempotency.claim('alice', 'k1', 'fs__write', H1)).toEqual({ kind: 'new' });
    await l.whenCommitted();
    expect(dbState('k1')).toBe('in_flight');
    l.idempotency.complete('alice', 'k1', ANSWER);
    expect(l.idempotency.claim('alice', 'k1', 'fs__write', H1)).toEqual({ kind: 'replay', answer: ANSWER });
    await l.whenCommitted();
    expect(dbState('k1')).toBe('done');
    await l.close();
    const again = open();
    expect(again.idempotency.claim('alice', 'k1', 'fs__write', H1)).toEqual({ kind: 'replay', answer: ANSWER });
  });

  it('replays a stored JSON-RPC error too', async () => {
    t = tempDir();
    const l = open();
    l.idempotency.claim('alice', 'k', 't', H1);
    const err: StoredAnswer = { error: { code: -32602, message: 'bad', data: { field: 'x' } } };
    l.idempotency.complete('alice', 'k', err);
    await l.whenCommitted();
    await l.close();
    expect(open().idempotency.claim('alice', 'k', 't', H1)).toEqual({ kind: 'replay', answer: err });
  });

  it('10 concurrent claims: one runs, nine wait and all get the same, committed answer', async () => {
    t = tempDir();
    const l = open();
    const claims: IdempotencyClaim[] = await Promise.all(
      Array.from({ length: 10 }, () => Promise.resolve().then(() => l.idempotency.claim('alice', 'same', 'mem__store', H1))),
    );
    expect(claims.filter((c) => c.kind === 'new')).toHaveLength(1);
    const waits = claims.filter((c): c is Extract<IdempotencyClaim, { kind: 'wait' }> => c.kind === 'wait');
    expect(waits).toHaveLength(9);
    const statesSeen: (string | undefined)[] = [];
    const answers = Promise.all(
      waits.map((w) =>
        w.result.then((a) => {
          statesSeen.push(dbState('same'));
          return a;
        }),
      ),
    );
    await new Promise((r) => setTimeout(r, 20));
    expect(statesSeen).toEqual([]); // nobody got an answer before complete()
    l.idempotency.complete('alice', 'same', ANSWER);
    const got = await answers;
    expect(got.every((a) => a === ANSWER)).toBe(true);
    expect(statesSeen).toEqual(Array(9).fill('done')); // durable before any waiter saw it
  });

  it('conflict for another tool or other arguments, in flight or done', async () => {
    t = tempDir();
    const l = open();
    l.idempotency.claim('alice', 'k', 'fs__write', H1);
    expect(l.idempotency.claim('alice', 'k', 'fs__delete', H1)).toEqual({ kind: 'conflict', tool: 'fs__write' });
    expect(l.idempotency.claim('alice', 'k', 'fs__write', H2)).toEqual({ kind: 'conflict', tool: 'fs__write' });
    l.idempotency.complete('alice', 'k', ANSWER);
    await l.whenCommitted();
    await l.whenCommitted();
    expect(l.idempotency.claim('alice', 'k', 'fs__write', H2)).toEqual({ kind: 'conflict', tool: 'fs__write' });
    expect(l.idempotency.claim('alice', 'k', 'other', H1)).toEqual({ kind: 'conflict', tool: 'fs__write' });
  });

  it('keys are scoped to the principal', async () => {
    t = tempDir();
    const l = open();
    expect(l.idempotency.claim('alice', 'k', 'fs__write', H1).kind).toBe('new');
    expect(l.idempotency.claim('bob', 'k', 'fs__delete', H2).kind).toBe('new');
    l.idempotency.complete('bob', 'k', { result: { bob: true } });
    await l.whenCommitted();
    const alice = l.idempotency.claim('alice', 'k', 'fs__write', H1);
    expect(alice.kind).toBe('wait'); // still alice's own in-flight call, untouched by bob
    l.idempotency.complete('alice', 'k', ANSWER);
    await expect((alice as { result: Promise<StoredAnswer> }).result).resolves.toBe(ANSWER);
    expect(l.idempotency.claim('bob', 'k', 'fs__delete', H2)).toEqual({ kind: 'replay', answer: { result: { bob: true } } });
    expect(l.idempotency.claim('carol', 'k', 'fs__write', H1).kind).toBe('new');
  });

  it('a claim in flight when the process ended is unknown afterwards', async () => {
    t = tempDir();
    const l = open();
    l.idempotency.claim('alice', 'k', 't', H1);
    await l.whenCommitted();
    await l.close(); // like a crash: nobody completed it
    const again = open();
    expect(dbState('k')).toBe('unknown');
    expect(again.idempotency.claim('alice', 'k', 't', H1)).toEqual({ kind: 'unknown' });
    // Even with other arguments the key stays taken (conflict names the tool).
    expect(again.idempotency.claim('alice', 'k', 't', H2)).toEqual({ kind: 'conflict', tool: 't' });
  });

  it('a key recovered after a crash is remembered for the TTL from the recovery, not from its claim', async () => {
    t = tempDir();
    const clock = { t: 1_000_000 };
    const day = 24 * 3_600_000;
    const l = open({ now: () => clock.t, ttl: day });
    l.idempotency.claim('alice', 'long', 't', H1);
    await l.whenCommitted();
    await l.close(); // a call that ran for hours, then the hub died
    clock.t += day - 60_000;
    const again = open({ now: () => clock.t, ttl: day });
    expect(dbState('long')).toBe('unknown');
    // A day after the claim, the key is still taken: its end is the recovery, a minute before.
    clock.t += 120_000;
    expect(again.idempotency.claim('alice', 'long', 't', H1)).toEqual({ kind: 'unknown' });
    // A day after the recovery it is free.
    clock.t += day;
    expect(again.idempotency.claim('alice', 'long', 't', H1).kind).toBe('new');
  });

  it('markUnknown keeps the key taken and tells waiters', async () => {
    t = tempDir();
    const l = open();
    l.idempotency.claim('alice', 'k', 't', H1);
    const w = l.idempotency.claim('alice', 'k', 't', H1) as { kind: 'wait'; result: Promise<StoredAnswer> };
    l.idempotency.markUnknown('alice', 'k');
    await expect(w.result).rejects.toBeInstanceOf(IdempotencyUnknownError);
    expect(l.idempotency.claim('alice', 'k', 't', H1)).toEqual({ kind: 'unknown' });
    await l.whenCommitted();
    expect(dbState('k')).toBe('unknown');
    expect(l.idempotency.claim('alice', 'k', 't', H1)).toEqual({ kind: 'unknown' });
  });

  it('abandon frees the key and sends waiters back to claim again', async () => {
    t = tempDir();
    const l = open();
    l.idempotency.claim('alice', 'k', 't', H1);
    await l.whenCommitted();
    const w = l.idempotency.claim('alice', 'k', 't', H1) as { kind: 'wait'; result: Promise<StoredAnswer> };
    l.idempotency.abandon('alice', 'k');
    await expect(w.result).rejects.toBeInstanceOf(IdempotencyAbandonedError);
    // Before the delete is committed a new claim already wins…
    expect(l.idempotency.claim('alice', 'k', 't', H2)).toEqual({ kind: 'new' });
    await l.whenCommitted();
    // …and the delete (queued first) did not remove the new claim.
    expect(dbState('k')).toBe('in_flight');
    l.idempotency.abandon('alice', 'k');
    await l.whenCommitted();
    expect(dbState('k')).toBeUndefined();
    l.idempotency.abandon('alice', 'k'); // no claim: nothing happens
    l.idempotency.complete('alice', 'nope', ANSWER); // no claim: ignored
    await l.whenCommitted();
    expect(dbState('nope')).toBeUndefined();
  });

  it('entries older than the TTL count as absent and are purged', async () => {
    t = tempDir();
    let clock = 1_000_000;
    const l = open({ now: () => clock, ttl: 60_000 });
    l.idempotency.claim('alice', 'old', 't', H1);
    l.idempotency.complete('alice', 'old', ANSWER);
    l.idempotency.claim('alice', 'gone', 't', H1);
    l.idempotency.complete('alice', 'gone', ANSWER);
    await l.whenCommitted();
    await l.whenCommitted();
    clock += 59_999;
    expect(l.idempotency.claim('alice', 'old', 't', H2).kind).toBe('conflict');
    clock += 1;
    // Expired: a new call with the same key (even other arguments) starts afresh.
    expect(l.idempotency.claim('alice', 'old', 't', H2)).toEqual({ kind: 'new' });
    await l.whenCommitted();
    expect(dbState('old')).toBe('in_flight');
    await l.idempotency.purgeExpired();
    expect(dbState('gone')).toBeUndefined();
    expect(dbState('old')).toBe('in_flight'); // a running claim is never purged
    // An in-flight claim in this process outlives the TTL: its waiters still get the answer.
    clock += 10 * 60_000;
    expect(l.idempotency.claim('alice', 'old', 't', H2).kind).toBe('wait');
  });

  it("the TTL counts from the call's end: a call longer than the TTL is still remembered after it", async () => {
    t = tempDir();
    let clock = 2_000_000;
    const l = open({ now: () => clock, ttl: 60_000 });
    l.idempotency.claim('alice', 'long', 't', H1);
    clock += 90_000; // the call runs longer than the TTL
    l.idempotency.complete('alice', 'long', ANSWER);
    await l.whenCommitted();
    await l.whenCommitted();
    clock += 59_999;
    await l.idempotency.purgeExpired();
    expect(dbState('long')).toBe('done');
    expect(l.idempotency.claim('alice', 'long', 't', H1).kind).toBe('replay');
    clock += 1;
    await l.idempotency.purgeExpired();
    expect(dbState('long')).toBeUndefined();
    expect(l.idempotency.claim('alice', 'long', 't', H1)).toEqual({ kind: 'new' });
  });

  it('the periodic purge with nothing expired does not wait for another writer', async () => {
    t = tempDir();
    const l = open({ ttl: 60_000 });
    l.idempotency.claim('alice', 'k', 't', H1);
    l.idempotency.complete('alice', 'k', ANSWER);
    await l.whenCommitted();
    const other = new Database(t.db);
    other.prepare('BEGIN IMMEDIATE').run();
    try {
      const t0 = Date.now();
      await l.idempotency.purgeExpired();
      // A write would have waited busy_timeout (5 s) on this thread.
      expect(Date.now() - t0).toBeLessThan(2500);
    } finally {
      other.prepare('ROLLBACK').run();
      other.close();
    }
    expect(dbState('k')).toBe('done');
  });

  it('close rejects waiters nobody will answer', async () => {
    t = tempDir();
    const l = open();
    l.idempotency.claim('alice', 'k', 't', H1);
    const w = l.idempotency.claim('alice', 'k', 't', H1) as { kind: 'wait'; result: Promise<StoredAnswer> };
    await l.close();
    ledger = undefined;
    await expect(w.result).rejects.toThrow(/closed/);
    expect(() => l.idempotency.claim('alice', 'x', 't', H1)).toThrow(/closed/);
  });

  // A tool group is an authorization boundary (an API key limited to groups): one principal's key
  // through one group's endpoint is another key than through another's, or through /mcp.
  it("a key is its principal's on one endpoint: another group's use of it is another key; each replays on its own", async () => {
    t = tempDir();
    const l = open();
    const small = { principal: 'alice', group: 'small' };
    expect(l.idempotency.claim(small, 'k', 'a__echo', H1)).toEqual({ kind: 'new' });
    l.idempotency.complete(small, 'k', ANSWER);
    expect(l.idempotency.claim({ principal: 'alice', group: 'narrow' }, 'k', 'a__echo', H2)).toEqual({ kind: 'new' });
    expect(l.idempotency.claim('alice', 'k', 'b__echo', H1)).toEqual({ kind: 'new' });
    await l.whenCommitted();
    await l.close();
    const again = open();
    expect(again.idempotency.claim(small, 'k', 'a__echo', H1)).toEqual({ kind: 'replay', answer: ANSWER });
    expect(again.idempotency.claim({ principal: 'alice', group: 'narrow' }, 'k', 'a__echo', H1)).toEqual({ kind: 'conflict', tool: 'a__echo' }); // its own call's arguments, H2 (left unknown at the restart)
  });

  // Keys kept before they were scoped to endpoints (migration 0016) do not say which endpoint
  // used them: every endpoint reads them, as before, so a retry across the upgrade still replays.
  it('a key kept before keys were scoped to endpoints is read from every endpoint until its TTL', async () => {
    t = tempDir();
    const raw = new Database(t.db);
    migrate(raw, loadMigrations().slice(0, 15));
    raw.prepare(`INSERT INTO idempotency (principal, key, tool, args_hash, state, answer_json, created_ms, completed_ms) VALUES ('alice', 'old', 'a__echo', ?, 'done', ?, ?, ?)`).run(H1, JSON.stringify(ANSWER), Date.now() - 2_000, Date.now() - 1_000);
    raw.close();
    const l = open();
    expect(l.idempotency.claim({ principal: 'alice', group: 'small' }, 'old', 'a__echo', H1)).toEqual({ kind: 'replay', answer: ANSWER });
    expect(l.idempotency.claim('alice', 'old', 'a__echo', H2)).toEqual({ kind: 'conflict', tool: 'a__echo' });
    expect(l.idempotency.claim('bob', 'old', 'a__echo', H1)).toEqual({ kind: 'new' });
  });
});
