import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_KEPT_URIS, SessionMemory, TOUCH_EVERY_MS, type Kept, type SessionMemoryStore } from '../../src/downstream/session-memory.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { SESSION_MEMORY_TTL_MS } from '../../src/ledger/session-memory.js';
import { loadMigrations, migrate } from '../../src/ledger/migrate.js';
import { tempDir } from './ledger-helpers.js';

/** A store that counts its writes. */
function counted(): SessionMemoryStore & { writes: number; keys(): string[] } {
  const map = new Map<string, Kept>();
  return {
    home: 'h',
    writes: 0,
    keys: () => [...map.keys()],
    get: (k) => map.get(k),
    entries: () => map.entries(),
    put(k, v) {
      this.writes++;
      map.set(k, v);
    },
    delete(k) {
      this.writes++;
      map.delete(k);
    },
  };
}

describe('SessionMemory', () => {
  it('keeps a session’s subscriptions and log level by a digest of its id, writing only changes', () => {
    const store = counted();
    const m = new SessionMemory(store);
    expect(m.recall('s1.abc', undefined)).toBeUndefined();
    m.subscribed('s1.abc', 'a://0'); // not open here: nothing kept
    m.levelSet('s1.abc', 'debug');
    expect(store.writes).toBe(0);
    m.opened('s1.abc', undefined);
    expect(m.recall('s1.abc', undefined)).toEqual({ uris: [], opener: '' });
    m.subscribed('s1.abc', 'a://1');
    m.subscribed('s1.abc', 'a://1');
    m.subscribed('s1.abc', 'a://2');
    m.levelSet('s1.abc', 'error');
    m.levelSet('s1.abc', 'error');
    m.unsubscribed('s1.abc', 'a://1');
    m.unsubscribed('s1.abc', 'a://never');
    expect(m.recall('s1.abc', undefined)).toEqual({ uris: ['a://2'], logLevel: 'error', opener: '' });
    expect(store.writes).toBe(5);
    expect(store.keys()).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/)]); // never the id itself
    m.ended('s1.abc');
    m.ended('s1.abc');
    expect(m.recall('s1.abc', undefined)).toBeUndefined();
    expect(store.writes).toBe(6);
  });

  it('rewrites an open session’s row once a day while it is used, so the prune never takes it', () => {
    const store = counted();
    let now = 1_000;
    const m = new SessionMemory(store, () => now);
    m.opened('s', undefined);
    m.touch('gone', now + TOUCH_EVERY_MS); // no row: nothing
    m.touch('s', now + 60_000);
    expect(store.writes).toBe(1);
    now += TOUCH_EVERY_MS;
    m.touch('s', now);
    expect(store.writes).toBe(2);
    m.touch('s', now + 60_000);
    expect(store.writes).toBe(2);
  });

  it('gives a session back only to the API key that opened it (one opened without a key: to any credential); a removed key’s rows go', () => {
    const store = counted();
    const m = new SessionMemory(store);
    const [k1, k2] = ['1'.repeat(64), '2'.repeat(64)];
    m.opened('by-k1', k1);
    m.opened('by-k2', k2.toUpperCase()); // a hash is one key however its hex is written
    m.opened('by-token', undefined);
    expect(m.recall('by-k1', k2)).toBeUndefined();
    expect(m.recall('by-k1', undefined)).toBeUndefined();
    expect(m.recall('by-k1', k1)).toEqual({ uris: [], opener: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(m.recall('by-k2', k2)).toBeDefined();
    expect(m.recall('by-token', k1)).toBeDefined();
    expect(m.recall('by-token', undefined)).toBeDefined();
    // Neither the key's hash nor anything the key could be read back from is kept.
    expect(JSON.stringify([...store.entries()])).not.toContain(k1);
    expect(m.forgetOpenedBy(new Set())).toBe(0);
    expect(m.forgetOpenedBy(new Set([k1]))).toBe(1);
    expect([m.recall('by-k1', k1), m.recall('by-k2', k2) !== undefined, m.recall('by-token', undefined) !== undefined]).toEqual([undefined, true, true]);
  });

  it('keeps at most MAX_KEPT_URIS subscriptions of one session', () => {
    const m = new SessionMemory(counted());
    m.opened('s', undefined);
    for (let i = 0; i <= MAX_KEPT_URIS; i++) m.subscribed('s', `a://${i}`);
    expect(m.recall('s', undefined)?.uris).toHaveLength(MAX_KEPT_URIS);
  });
});

describe('ledger session memory store', () => {
  let t: ReturnType<typeof tempDir> | undefined;
  afterEach(() => t?.cleanup());

  it('keeps rows across reopen, deletes ended ones, and prunes those untouched for 30 days at open', async () => {
    t = tempDir();
    let now = 1_800_000_000_000;
    const a = Ledger.open({ path: t.db, now: () => now });
    const m = new SessionMemory(a.sessionMemoryStore());
    const home = a.sessionMemoryStore().home;
    expect(home).toMatch(/^[0-9a-f]{32}$/);
    m.opened('old', undefined);
    m.subscribed('old', 'a://old');
    now += 1000;
    m.opened('kept', undefined);
    m.subscribed('kept', 'a://1');
    m.levelSet('kept', 'notice');
    m.opened('gone', undefined);
    m.subscribed('gone', 'a://2');
    m.ended('gone');
    await a.close();

    now += SESSION_MEMORY_TTL_MS - 500; // 'old' is past 30 days, 'kept' is not
    const b = Ledger.open({ path: t.db, now: () => now });
    expect(b.sessionMemoryStore().home).toBe(home); // the ledger's own id, kept
    const again = new SessionMemory(b.sessionMemoryStore());
    expect(again.recall('kept', undefined)).toEqual({ uris: ['a://1'], logLevel: 'notice', opener: '' });
    expect(again.recall('gone', undefined)).toBeUndefined();
    expect(again.recall('old', undefined)).toBeUndefined();
    await b.close();
    const raw = new Database(t.db, { readonly: true });
    expect(raw.prepare('SELECT COUNT(*) AS n FROM session_memory').get()).toEqual({ n: 1 });
    raw.close();
  });

  it('keeps who opened a session; a row from before that was kept goes to the first key of its principal, and with any key a reload removes', async () => {
    t = tempDir();
    const [k1, k2] = ['1'.repeat(64), '2'.repeat(64)];
    // Rows written by a hub of schema 10, without openers.
    const all = loadMigrations();
    const raw = new Database(t.db);
    migrate(raw, all.slice(0, 10));
    const row = raw.prepare(`INSERT INTO session_memory (session, subscriptions, log_level, updated_ms) VALUES (?, '[]', NULL, ?)`);
    for (const s of ['old-1', 'old-2']) row.run(createHash('sha256').update(s).digest('hex'), Date.now());
    raw.close();
    const a = Ledger.open({ path: t.db });
    new SessionMemory(a.sessionMemoryStore()).opened('bound', k1);
    await a.close();

    const b = Ledger.open({ path: t.db });
    const again = new SessionMemory(b.sessionMemoryStore());
    expect(again.recall('bound', k2)).toBeUndefined();
    expect(again.recall('bound', k1)).toBeDefined();
    // Which key opened it cannot be told: the first key of its principal takes it, and keeps it.
    expect(again.recall('old-1', k2)).toBeDefined();
    expect(again.recall('old-1', k1)).toBeUndefined();
    // Removing a key (any) takes the rows of unknown openers, and that key's own.
    expect(again.forgetOpenedBy(new Set([k1]))).toBe(2);
    expect([again.recall('bound', k1), again.recall('old-2', k2), again.recall('old-1', k2) !== undefined]).toEqual([undefined, undefined, true]);
    await b.close();
    const c = Ledger.open({ path: t.db });
    expect(new SessionMemory(c.sessionMemoryStore()).recall('old-1', k2)).toBeDefined();
    await c.close();
  });
});
