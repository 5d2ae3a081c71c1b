/**
 * The hub's requestState is single use across restarts: the sealer records what it spends in
 * the ledger (spent_request_states) and a sealer over the reopened ledger refuses it; a state
 * carrying the user's confirmation is taken as one only by a sealer of the same store, elsewhere
 * (another ledger, none) its answer is none and the user is asked again. A real ledger file,
 * reopened; only the clock is given.
 */
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { RequestStateSealer, type Binding } from '../../src/router/request-state.js';
import { tempDir } from './ledger-helpers.js';

const KEY = randomBytes(32);
const TTL = 60_000;
const bind = (): Binding => ({ principal: 'p', method: 'tools/call', target: 't', args: { a: 1 } });

describe('spent requestStates in the ledger', () => {
  const dirs: ReturnType<typeof tempDir>[] = [];
  afterEach(() => {
    for (const t of dirs.splice(0)) t.cleanup();
  });
  const dir = () => {
    const t = tempDir();
    dirs.push(t);
    return t;
  };

  it('a state spent before the ledger was reopened is refused after; one given back, or a parked call\'s, is not recorded', async () => {
    const t = dir();
    let now = 1_800_000_000_000;
    const clock = () => now;
    const a = Ledger.open({ path: t.db, now: clock });
    const first = new RequestStateSealer(KEY, TTL, clock, a.spentStateStore());
    const [spent, released, parked] = [first.seal(bind(), { k: 'confirm' }), first.seal(bind(), { k: 'fwd', server: 's', ok: 1 }), first.seal(bind(), { k: 'park', id: 'x' })];
    for (const s of [spent, released, parked]) first.open(s, bind());
    first.release(released);
    await a.close();

    const b = Ledger.open({ path: t.db, now: clock });
    const second = new RequestStateSealer(KEY, TTL, clock, b.spentStateStore());
    expect(() => second.open(spent, bind())).toThrow('requestState was already used');
    // The same ledger: its confirmation stands.
    expect(second.open(released, bind())).toEqual({ k: 'fwd', server: 's', ok: 1 });
    expect(second.open(parked, bind())).toEqual({ k: 'park', id: 'x' });
    await b.close();
    const raw = new Database(t.db, { readonly: true });
    expect(raw.prepare('SELECT COUNT(*) AS n FROM spent_request_states').get()).toEqual({ n: 2 });
    raw.close();

    // Expired, its row goes at the next open.
    now += TTL + 1;
    const c = Ledger.open({ path: t.db, now: clock });
    await c.close();
    const after = new Database(t.db, { readonly: true });
    expect(after.prepare('SELECT COUNT(*) AS n FROM spent_request_states').get()).toEqual({ n: 0 });
    after.close();
  });

  it('a confirmation sealed under another store, or by another process without one, is no answer; other states open as they are', async () => {
    const [ta, tb] = [dir(), dir()];
    const a = Ledger.open({ path: ta.db });
    const b = Ledger.open({ path: tb.db });
    try {
      const here = new RequestStateSealer(KEY, TTL, Date.now, a.spentStateStore());
      const there = new RequestStateSealer(KEY, TTL, Date.now, b.spentStateStore());
      const loose = new RequestStateSealer(KEY);
      expect(there.open(here.seal(bind(), { k: 'confirm' }), bind())).toEqual({ k: 'confirm', again: 1 });
      expect(there.open(here.seal(bind(), { k: 'fwd', server: 's', up: 'u', ok: 1 }), bind())).toEqual({ k: 'fwd', server: 's', up: 'u' });
      expect(there.open(here.seal(bind(), { k: 'fwd', server: 's', up: 'u' }), bind())).toEqual({ k: 'fwd', server: 's', up: 'u' });
      expect(new RequestStateSealer(KEY).open(loose.seal(bind(), { k: 'confirm' }), bind())).toEqual({ k: 'confirm', again: 1 });
      expect(loose.open(loose.seal(bind(), { k: 'confirm' }), bind())).toEqual({ k: 'confirm' });
      expect(here.open(here.seal(bind(), { k: 'confirm' }), bind())).toEqual({ k: 'confirm' });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
