import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { familiesOf, KnownCapabilities, type CapabilityStore } from '../../src/hub/known-capabilities.js';
import { Ledger } from '../../src/ledger/ledger.js';
import type { ServerCapabilities } from '../../src/protocol/types.js';
import { tempDir } from './ledger-helpers.js';

const LISTS = { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true } };

/** A store that counts its writes. */
function memoryStore(seed: Record<string, ServerCapabilities> = {}): CapabilityStore & { puts: number } {
  const map = new Map(Object.entries(seed));
  return {
    puts: 0,
    get: (s) => map.get(s),
    put(s, c) {
      this.puts++;
      map.set(s, c);
    },
    retain(ids) {
      for (const s of map.keys()) if (!ids.has(s)) map.delete(s);
    },
  };
}

describe('KnownCapabilities', () => {
  it('a ready server counts with its own; one not ready with what it had when last ready', () => {
    const known = new KnownCapabilities();
    const own = { tools: {}, completions: {}, experimental: { big: 'x'.repeat(1000) } } as ServerCapabilities;
    expect(known.of('a', 'ready', own)).toBe(own);
    known.ready('a', own);
    expect(known.of('a', 'restarting', undefined)).toEqual({ tools: { listChanged: true }, completions: {} });
    expect(known.of('a', 'failed', undefined)).toEqual({ tools: { listChanged: true }, completions: {} });
  });

  it('a server never seen ready is assumed to offer the list families while it starts, and nothing once it failed or stopped', () => {
    const known = new KnownCapabilities();
    expect(known.of('a', 'starting', undefined)).toEqual(LISTS);
    expect(known.of('a', 'restarting', undefined)).toEqual(LISTS);
    expect(known.of('a', 'failed', undefined)).toBeUndefined();
    expect(known.of('a', 'stopped', undefined)).toBeUndefined();
  });

  it('what the store kept from an earlier process counts before the server is ready; a put only when it changed', () => {
    const store = memoryStore({ a: { prompts: { listChanged: true } } });
    const known = new KnownCapabilities(store);
    expect(known.of('a', 'starting', undefined)).toEqual({ prompts: { listChanged: true } });
    known.ready('a', { prompts: { listChanged: false } });
    expect(store.puts).toBe(0); // the same families
    known.ready('a', { prompts: {}, logging: {} });
    expect(store.puts).toBe(1);
    known.ready('a', { prompts: {}, logging: {} });
    expect(store.puts).toBe(1);
    expect(store.get('a')).toEqual({ prompts: { listChanged: true }, logging: {} });
  });

  it('a server no longer configured is forgotten, in this process and in the store: one added later under its id starts afresh', () => {
    const store = memoryStore({ gone: { prompts: {} }, kept: { logging: {} } });
    const known = new KnownCapabilities(store);
    known.ready('seen', { resources: { subscribe: true } });
    known.retain(new Set(['kept']));
    expect(known.of('gone', 'starting', undefined)).toEqual(LISTS);
    expect(known.of('seen', 'starting', undefined)).toEqual(LISTS);
    expect(known.of('kept', 'starting', undefined)).toEqual({ logging: {} });
    expect([store.get('gone'), store.get('seen')]).toEqual([undefined, undefined]);
  });

  it('familiesOf keeps what the hub builds its own capabilities from, and nothing else', () => {
    expect(familiesOf({ resources: { subscribe: true, listChanged: false }, experimental: { x: {} }, tasks: {} } as ServerCapabilities)).toEqual({
      resources: { listChanged: true, subscribe: true },
    });
    expect(familiesOf({ resources: {} })).toEqual({ resources: { listChanged: true } });
    expect(familiesOf({})).toEqual({});
  });
});

describe('ledger capability store', () => {
  let t: ReturnType<typeof tempDir> | undefined;
  afterEach(() => t?.cleanup());

  it('keeps each server’s capabilities across reopen; a row that is not an object is skipped', async () => {
    t = tempDir();
    const a = Ledger.open({ path: t.db });
    a.capabilityStore().put('s', { tools: { listChanged: true } });
    a.capabilityStore().put('s', { tools: { listChanged: true }, logging: {} });
    a.capabilityStore().put('bad', { tools: {} });
    expect(a.capabilityStore().get('s')).toEqual({ tools: { listChanged: true }, logging: {} });
    await a.close();

    const raw = new Database(t.db);
    raw.prepare(`UPDATE server_capabilities SET capabilities = '[1]' WHERE server = 'bad'`).run();
    raw.close();
    const b = Ledger.open({ path: t.db });
    expect(b.capabilityStore().get('s')).toEqual({ tools: { listChanged: true }, logging: {} });
    expect(b.capabilityStore().get('bad')).toBeUndefined();
    expect(b.capabilityStore().get('other')).toBeUndefined();
    b.capabilityStore().retain(new Set(['bad']));
    expect(b.capabilityStore().get('s')).toBeUndefined();
    await b.close();
    const c = Ledger.open({ path: t.db });
    expect(c.capabilityStore().get('s')).toBeUndefined(); // the row is gone, not only the memory
    await c.close();
  });
});
