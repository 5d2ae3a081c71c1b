import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_KEPT_URIS, SessionMemory, TOUCH_EVERY_MS, type Kept, type SessionMemoryStore } from '../../src/downstream/session-memory.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { SESSION_MEMORY_TTL_MS } from '../../src/ledger/session-memory.js';
import { tempDir } from './ledger-helpers.js';

/** A store that counts its writes. */
function counted(): SessionMemoryStore & { writes: number; keys(): string[] } {
  const map = new Map<string, Kept>();
  return {
    home: 'h',
    writes: 0,
    keys: () => [...map.keys()],
    get: (k) => map.get(k),
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
    expect(m.recall('s1.abc')).toBeUndefined();
    m.subscribed('s1.abc', 'a://0'); // not open here: nothing kept
    m.levelSet('s1.abc', 'debug');
    expect(store.writes).toBe(0);
    m.opened('s1.abc');
    expect(m.recall('s1.abc')).toEqual({ uris: [] });
    m.subscribed('s1.abc', 'a://1');
    m.subscribed('s1.abc', 'a://1');
    m.subscribed('s1.abc', 'a://2');
    m.levelSet('s1.abc', 'error');
    m.levelSet('s1.abc', 'error');
    m.unsubscribed('s1.abc', 'a://1');
    m.unsubscribed('s1.abc', 'a://never');
    expect(m.recall('s1.abc')).toEqual({ uris: ['a://2'], logLevel: 'error' });
    expect(store.writes).toBe(5);
    expect(store.keys()).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/)]); // never the id itself
    m.ended('s1.abc');
    m.ended('s1.abc');
    expect(m.recall('s1.abc')).toBeUndefined();
    expect(store.writes).toBe(6);
  });

  it('rewrites an open session’s row once a day while it is used, so the prune never takes it', () => {
    const store = counted();
    let now = 1_000;
    const m = new SessionMemory(store, () => now);
    m.opened('s');
    m.touch('gone', now + TOUCH_EVERY_MS); // no row: nothing
    m.touch('s', now + 60_000);
    expect(store.writes).toBe(1);
    now += TOUCH_EVERY_MS;
    m.touch('s', now);
    expect(store.writes).toBe(2);
    m.touch('s', now + 60_000);
    expect(store.writes).toBe(2);
  });

  it('keeps at most MAX_KEPT_URIS subscriptions of one session', () => {
    const m = new SessionMemory(counted());
    m.opened('s');
    for (let i = 0; i <= MAX_KEPT_URIS; i++) m.subscribed('s', `a://${i}`);
    expect(m.recall('s')?.uris).toHaveLength(MAX_KEPT_URIS);
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
    m.opened('old');
    m.subscribed('old', 'a://old');
    now += 1000;
    m.opened('kept');
    m.subscribed('kept', 'a://1');
    m.levelSet('kept', 'notice');
    m.opened('gone');
    m.subscribed('gone', 'a://2');
    m.ended('gone');
    await a.close();

    now += SESSION_MEMORY_TTL_MS - 500; // 'old' is past 30 days, 'kept' is not
    const b = Ledger.open({ path: t.db, now: () => now });
    expect(b.sessionMemoryStore().home).toBe(home); // the ledger's own id, kept
    const again = new SessionMemory(b.sessionMemoryStore());
    expect(again.recall('kept')).toEqual({ uris: ['a://1'], logLevel: 'notice' });
    expect(again.recall('gone')).toBeUndefined();
    expect(again.recall('old')).toBeUndefined();
    await b.close();
    const raw = new Database(t.db, { readonly: true });
    expect(raw.prepare('SELECT COUNT(*) AS n FROM session_memory').get()).toEqual({ n: 1 });
    raw.close();
  });
});
