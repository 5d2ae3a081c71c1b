/**
 * The hub learns of an approval made by another process (the CLI) by polling the change count
 * of migration 0010. A read that fails must not use up the count: otherwise the approval stays
 * unseen until some other change moves it again. Polling costs nothing while only the hub
 * writes: it used to re-read every pin whenever `PRAGMA data_version` moved, which the hub's own
 * ledger thread moves after each batch (seconds of the event loop every 500 ms with 80k pins).
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { PinRecord } from '../../src/catalog/pins.js';
import { heldItemFindings } from '../../src/cli/doctor.js';
import type { HubConfig } from '../../src/config/types.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { openLedgerDb } from '../../src/ledger/db.js';
import { approvePins, matchPins, PIN_POLL_MS, PIN_UPSERT, readItemPins, readPins } from '../../src/ledger/pins.js';
import { begin, closeAndRemove, end, tempDir, until } from './ledger-helpers.js';

function pending(tool: string): PinRecord {
  return {
    server: 's',
    tool,
    hash: 'a'.repeat(64),
    variants: [],
    bodyHash: 'b'.repeat(64),
    definition: '{"name":"x"}',
    pendingHash: 'c'.repeat(64),
    pendingBodyHash: 'd'.repeat(64),
    pendingDefinition: '{"name":"x","description":"changed"}',
    pendingReason: 'changed',
    renamedFrom: null,
    firstSeenMs: 1,
    approvedMs: 1,
    approvedBy: 'first-seen',
    pendingSinceMs: 2,
  };
}

describe('pin store: approvals by another process', () => {
  let ledger: Ledger | undefined;
  let t: ReturnType<typeof tempDir> | undefined;
  afterEach(async () => {
    await closeAndRemove(ledger, t);
    ledger = undefined;
  });

  async function storeWithPending(): Promise<ReturnType<Ledger['pinStore']>> {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const store = ledger.pinStore();
    store.put(pending('echo'));
    // The put is written by the group commit; wait until another connection sees the row.
    const other = new Database(t.db, { readonly: true });
    try {
      for (let i = 0; i < 200 && readPins(other).length === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(readPins(other)).toHaveLength(1);
    } finally {
      other.close();
    }
    store.poll(); // whatever the hub's own threads committed so far
    return store;
  }

  function approveElsewhere(): void {
    const cli = new Database(t!.db);
    try {
      expect(approvePins(cli, readPins(cli), 5)).toHaveLength(1);
    } finally {
      cli.close();
    }
  }

  it("a row an older build wrote (no hub_writes) reads as an older build's; once this build writes it, it does not", async () => {
    const store = await storeWithPending();
    expect(store.get('s', 'echo')?.fromOlderBuild).toBeUndefined();
    const raw = new Database(t!.db);
    try {
      expect(readPins(raw)[0]?.fromOlderBuild).toBeUndefined();
      raw.prepare('UPDATE tool_pins SET hub_writes = NULL').run(); // as a build before migration 0010 left it
      expect(readPins(raw)[0]?.fromOlderBuild).toBe(true);
    } finally {
      raw.close();
    }
  });

  it('sees the approval at the next poll and tells its listeners', async () => {
    const store = await storeWithPending();
    const told: PinRecord[][] = [];
    store.onExternalChange((c) => told.push(c));
    expect(store.poll()).toBe(false); // nothing new
    approveElsewhere();
    expect(store.poll()).toBe(true);
    expect(store.get('s', 'echo')).toMatchObject({ hash: 'c'.repeat(64), pendingHash: null, approvedBy: 'cli' });
    expect(told).toHaveLength(1);
    expect(told[0]![0]).toMatchObject({ tool: 'echo', approvedBy: 'cli' });
  });

  it('a re-read that fails is tried again at the next poll, with nothing else committed between', async () => {
    const store = await storeWithPending();
    approveElsewhere();
    // The database connection the store reads through (the ledger's own): fail one re-read,
    // as a busy or otherwise refused read would.
    const db = (store as unknown as { db: Database.Database }).db;
    const prepare = db.prepare.bind(db);
    let failed = 0;
    db.prepare = ((sql: string) => {
      if (failed === 0 && sql.includes('FROM tool_pins')) {
        failed++;
        throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      }
      return prepare(sql);
    }) as typeof db.prepare;
    try {
      expect(store.poll()).toBe(false);
      expect(failed).toBe(1);
      expect(store.get('s', 'echo')?.pendingHash).toBe('c'.repeat(64)); // not seen yet
      expect(store.poll()).toBe(true);
      expect(store.get('s', 'echo')).toMatchObject({ hash: 'c'.repeat(64), pendingHash: null, approvedBy: 'cli' });
    } finally {
      db.prepare = prepare;
    }
  });
});

describe('pin store: prompts, resources and templates (item_pins, migration 0014)', () => {
  let ledger: Ledger | undefined;
  let t: ReturnType<typeof tempDir> | undefined;
  afterEach(async () => {
    await closeAndRemove(ledger, t);
    ledger = undefined;
  });

  it("keeps each kind apart from tools, sees another process's approval in that kind's store only, and keeps them across a restart", async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const tools = ledger.pinStore();
    const { prompts, resources } = ledger.itemPinStores();
    // A tool and a prompt of one server may share a name.
    tools.put(pending('greet'));
    prompts.put(pending('greet'));
    resources.put(pending('x://doc'));
    await ledger.whenCommitted();
    await new Promise((r) => setImmediate(r));
    // The hub's own writes are not changes from elsewhere.
    expect([tools.poll(), prompts.poll(), resources.poll()]).toEqual([false, false, false]);
    const told: PinRecord[][] = [];
    prompts.onExternalChange((c) => told.push(c));
    const cli = openLedgerDb({ path: t.db });
    try {
      const recs = matchPins(cli, 'greet', 's', ['prompts']);
      expect(recs).toEqual([expect.objectContaining({ kind: 'prompts', tool: 'greet' })]);
      expect(matchPins(cli, 's/x://doc', undefined, ['tools', 'prompts', 'resources', 'resourceTemplates']).map((r) => r.kind)).toEqual(['resources']);
      expect(approvePins(cli, recs, 5)).toHaveLength(1);
    } finally {
      cli.close();
    }
    expect([tools.poll(), resources.poll(), prompts.poll()]).toEqual([false, false, true]);
    expect(told.map((c) => c.map((r) => r.tool))).toEqual([['greet']]);
    expect(prompts.get('s', 'greet')).toMatchObject({ hash: 'c'.repeat(64), pendingHash: null, approvedBy: 'cli' });
    expect(tools.get('s', 'greet')?.pendingHash).toBe('c'.repeat(64)); // the tool's change is still pending
    await ledger.close();
    ledger = Ledger.open({ path: t.db });
    expect(ledger.itemPinStores().prompts.get('s', 'greet')).toMatchObject({ hash: 'c'.repeat(64), pendingHash: null });
    expect(ledger.itemPinStores().resources.get('s', 'x://doc')).toMatchObject({ pendingHash: 'c'.repeat(64) });
    expect(ledger.itemPinStores().resourceTemplates.list()).toEqual([]);
    expect(ledger.pinStore().get('s', 'greet')?.pendingHash).toBe('c'.repeat(64));
    // `switchyard doctor` names what is held (its daemon's tool view has tools only): a template
    // or a prompt of a configured server. Not a listed resource (no longer pinned: the row is an
    // earlier build's), nor anything of a server gone from the config (its pins are kept).
    ledger.itemPinStores().resourceTemplates.put(pending('t://{id}'));
    ledger.itemPinStores().prompts.put({ ...pending('greet'), server: 'gone' });
    await ledger.whenCommitted();
    const config = (pinning?: 'warn') => ({ ledger: { enabled: true, path: t!.db }, policy: { pinning }, servers: { s: {} } }) as unknown as HubConfig;
    expect(heldItemFindings(config()).map((f) => `${f.level} ${f.message}`)).toEqual(['warn template s/t://{id} is held back: changed since it was approved (switchyard tools diff)']);
    expect(heldItemFindings(config('warn'))[0]?.message).toMatch(/^template s\/t:\/\/\{id\} is shown flagged \(pinning: warn\)/);
  });
});

describe('pin store: what a poll costs', () => {
  const PINS = 20_000;
  let ledger: Ledger | undefined;
  let t: ReturnType<typeof tempDir> | undefined;
  afterEach(async () => {
    await closeAndRemove(ledger, t);
    ledger = undefined;
  });

  /** PINS pins, each with a change pending, written as the hub writes them, before it opens. */
  function seed(path: string): void {
    const db = openLedgerDb({ path });
    try {
      const upsert = db.prepare(PIN_UPSERT);
      db.transaction(() => {
        for (let i = 0; i < PINS; i++) upsert.run({ ...pending(`tool${i}`), variants: null });
      })();
    } finally {
      db.close();
    }
  }

  /** Counts the rows of tool_pins read through this connection from now on (by any statement). */
  function countPinReads(db: Database.Database): { rows: number } {
    const seen = { rows: 0 };
    const prepare = db.prepare.bind(db);
    db.prepare = ((sql: string) => {
      const stmt = prepare(sql);
      if (!sql.includes('tool_pins')) return stmt;
      const all = stmt.all.bind(stmt);
      const get = stmt.get.bind(stmt);
      const iterate = stmt.iterate.bind(stmt);
      return Object.assign(stmt, {
        all: (...a: unknown[]) => {
          const rows = all(...a);
          seen.rows += rows.length;
          return rows;
        },
        get: (...a: unknown[]) => {
          const row = get(...a);
          if (row !== undefined) seen.rows++;
          return row;
        },
        *iterate(...a: unknown[]) {
          for (const row of iterate(...a)) {
            seen.rows++;
            yield row;
          }
        },
      });
    }) as typeof db.prepare;
    return seen;
  }

  it('reads no pin while only the hub writes (calls, its own pins), and only the approved one after an approval', async () => {
    t = tempDir();
    seed(t.db);
    ledger = Ledger.open({ path: t.db });
    const store = ledger.pinStore();
    expect(store.list()).toHaveLength(PINS);
    const db = (store as unknown as { db: Database.Database }).db;
    const version = () => db.pragma('data_version', { simple: true }) as number;
    const read = countPinReads(db);
    for (let round = 0; round < 3; round++) {
      const v = version();
      // Calls: their rows go in through the ledger's own thread, on another connection, which
      // moves data_version as any other process would.
      for (let i = 0; i < 20; i++) void ledger.record(begin(), end());
      expect(await until(version, (x) => x !== v, 10_000)).not.toBe(v);
      // The hub's own pins, through its group commit.
      store.put({ ...pending(`tool${round}`), pendingHash: String(round).repeat(64) });
      await ledger.whenCommitted();
      expect(store.poll()).toBe(false);
    }
    expect(read.rows).toBe(0);

    // The CLI approves one tool, on its own connection, as `switchyard tools approve` does.
    const cli = openLedgerDb({ path: t.db });
    try {
      expect(approvePins(cli, matchPins(cli, 's/tool7', 's'), 5)).toHaveLength(1);
    } finally {
      cli.close();
    }
    const told: PinRecord[][] = [];
    store.onExternalChange((c) => told.push(c));
    expect(store.poll()).toBe(true);
    expect(read.rows).toBe(1);
    expect(store.rowsPolled).toBe(1);
    expect(store.get('s', 'tool7')).toMatchObject({ hash: 'c'.repeat(64), pendingHash: null, approvedBy: 'cli' });
    expect(told.map((c) => c.map((r) => r.tool))).toEqual([['tool7']]);
    expect(store.poll()).toBe(false);
    expect(read.rows).toBe(1);
  }, 60_000);

  it('the four stores of a ledger share one timer and one read of the count; each tells only of its kind', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const stores = { tools: ledger.pinStore(), ...ledger.itemPinStores() };
    stores.tools.put(pending('greet'));
    stores.prompts.put(pending('greet'));
    await ledger.whenCommitted();
    await new Promise((r) => setImmediate(r)); // the puts' bookkeeping after their commit
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const told: string[] = [];
      for (const [kind, store] of Object.entries(stores)) store.onExternalChange((c) => told.push(`${kind}:${c.map((r) => r.tool).join()}`));
      expect(vi.getTimerCount()).toBe(1);
      const cli = openLedgerDb({ path: t.db });
      try {
        expect(approvePins(cli, matchPins(cli, 'greet', 's', ['prompts']), 5)).toHaveLength(1);
      } finally {
        cli.close();
      }
      vi.advanceTimersByTime(PIN_POLL_MS);
      expect(told).toEqual(['prompts:greet']);
      expect(stores.prompts.rowsPolled + stores.tools.rowsPolled + stores.resources.rowsPolled + stores.resourceTemplates.rowsPolled).toBe(1);
      for (const store of Object.values(stores)) store.close();
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('at rest the hub looks every 5 s, not twice a second; told to look (the CLI, after an approval) it reads the change at once', async () => {
    const dir = (t = tempDir());
    ledger = Ledger.open({ path: dir.db });
    const stores = { tools: ledger.pinStore(), ...ledger.itemPinStores() };
    stores.tools.put(pending('a'));
    stores.tools.put(pending('b'));
    await ledger.whenCommitted();
    await new Promise((r) => setImmediate(r)); // the puts' bookkeeping after their commit
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const told: string[] = [];
      stores.tools.onExternalChange((c) => told.push(c.map((r) => r.tool).join()));
      const approve = (name: string) => {
        const cli = openLedgerDb({ path: dir.db });
        try {
          expect(approvePins(cli, matchPins(cli, name, 's'), 5)).toHaveLength(1);
        } finally {
          cli.close();
        }
      };
      expect(ledger.lookForPinChanges()).toBe(false); // nothing changed: nothing told
      approve('a');
      vi.advanceTimersByTime(500); // the interval it had: an idle hub's most frequent wake-up
      expect(told).toEqual([]);
      expect(ledger.lookForPinChanges()).toBe(true);
      expect(told).toEqual(['a']);
      // A change the hub is not told of (an UPDATE by hand, a CLI that could not reach it): the poll.
      approve('b');
      vi.advanceTimersByTime(PIN_POLL_MS - 500 - 1); // its first tick is PIN_POLL_MS after the listener came
      expect(told).toEqual(['a']);
      vi.advanceTimersByTime(1);
      expect(told).toEqual(['a', 'b']);
      expect(PIN_POLL_MS).toBeGreaterThanOrEqual(5000);
      for (const store of Object.values(stores)) store.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it("an approval the hub has not read yet is not overwritten by the hub's next write of that pin (a list judged with the row from before)", async () => {
    const dir = (t = tempDir());
    ledger = Ledger.open({ path: dir.db });
    const l = ledger;
    const cases = [
      ['tools', l.pinStore(), 'a', 'looks after the write'],
      ['prompts', l.itemPinStores().prompts, 'a', 'looks after the write'],
      ['tools', l.pinStore(), 'b', 'looks before the write is committed'],
      ['prompts', l.itemPinStores().prompts, 'b', 'looks before the write is committed'],
    ] as const;
    for (const [kind, store, name, when] of cases) {
      const told: PinRecord[] = [];
      store.onExternalChange((c) => told.push(...c));
      store.put(pending(name));
      await l.whenCommitted();
      await new Promise((r) => setImmediate(r));
      const cli = openLedgerDb({ path: dir.db });
      try {
        expect(approvePins(cli, matchPins(cli, name, 's', [kind]), 5)).toHaveLength(1);
      } finally {
        cli.close();
      }
      // Before the hub reads it (no poll, no word from the CLI), the upstream changed again and
      // a list put its new version as pending, on the approved definition the hub still holds.
      const stale = store.get('s', name)!;
      store.put({ ...stale, pendingHash: 'e'.repeat(64), pendingDefinition: '{"name":"x","description":"again"}', pendingSinceMs: 9 });
      // The hub's next look (the CLI's word, or its poll) reads it.
      if (when === 'looks before the write is committed') expect(l.lookForPinChanges()).toBe(true);
      await l.whenCommitted();
      await new Promise((r) => setImmediate(r));
      if (when === 'looks after the write') expect(l.lookForPinChanges()).toBe(true);
      const reader = openLedgerDb({ path: dir.db });
      let row: PinRecord;
      try {
        row = (kind === 'tools' ? readPins(reader) : readItemPins(reader, 'prompts')).find((r) => r.tool === name)!;
      } finally {
        reader.close();
      }
      // The approval stands, in the file and in the hub, which judges the new version against it at its next list.
      expect([kind, when, row.hash, row.approvedBy]).toEqual([kind, when, 'c'.repeat(64), 'cli']);
      expect(store.get('s', name)).toMatchObject({ hash: 'c'.repeat(64), approvedBy: 'cli', pendingHash: null });
      expect(told.map((r) => [r.tool, r.hash])).toEqual([[name, 'c'.repeat(64)]]);
      // Judged again with the approved row, its write is made.
      store.put({ ...store.get('s', name)!, pendingHash: 'e'.repeat(64), pendingSinceMs: 10 });
      await l.whenCommitted();
      const after = openLedgerDb({ path: dir.db });
      try {
        expect((kind === 'tools' ? readPins(after) : readItemPins(after, 'prompts')).find((r) => r.tool === name)).toMatchObject({ hash: 'c'.repeat(64), pendingHash: 'e'.repeat(64) });
      } finally {
        after.close();
      }
    }
  });

  it('any write of another process is seen (an UPDATE by hand, an INSERT), by index; the hub writing such a row again is not', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const store = ledger.pinStore();
    const db = (store as unknown as { db: Database.Database }).db;
    const plan = db.prepare('EXPLAIN QUERY PLAN SELECT * FROM tool_pins WHERE change_seq > ?').all(0) as { detail: string }[];
    expect(plan.map((p) => p.detail).join()).toMatch(/USING INDEX tool_pins_change_seq/);
    store.put(pending('a'));
    await ledger.whenCommitted();
    await new Promise((r) => setImmediate(r)); // the put is no longer unflushed (a poll would keep it over the row)
    const other = new Database(t.db);
    try {
      other.prepare(`UPDATE tool_pins SET approved_by = 'hand', approved_ms = 9 WHERE tool = 'a'`).run();
      other.prepare(`INSERT INTO tool_pins (server, tool, hash, first_seen_ms, approved_ms, approved_by) VALUES ('s', 'b', ?, 1, 1, 'hand')`).run('f'.repeat(64));
    } finally {
      other.close();
    }
    expect(store.poll()).toBe(true);
    expect(store.rowsPolled).toBe(2);
    expect(store.get('s', 'a')).toMatchObject({ approvedBy: 'hand', approvedMs: 9 });
    expect(store.get('s', 'b')).toBeDefined();
    store.put({ ...store.get('s', 'b')!, pendingHash: 'e'.repeat(64) });
    store.put({ ...store.get('s', 'a')!, approvedBy: 'first-seen' });
    await ledger.whenCommitted();
    expect(store.poll()).toBe(false);
    expect(store.rowsPolled).toBe(2);
    expect(store.get('s', 'b')?.pendingHash).toBe('e'.repeat(64));
  });
});
