/**
 * Acceptance: idempotency keys through the real hub. Header (`Idempotency-Key`) and `_meta`
 * (`dev.switchyard/idempotency-key`) forms, sequential and 10 concurrent: the upstream runs the
 * call once (its COUNTER_FILE proves it) and every caller gets the same answer. A key is
 * replayed by a new daemon after the old one was killed; a key reused with other arguments or
 * another tool is refused without calling the upstream. Keys are per principal: the hub has
 * only `anonymous` until auth exists, so that part opens the hub-written ledger file directly.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { argsHash } from '../../src/ledger/canonical.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import {
  fixture,
  health,
  ledgerInProcess,
  legacySession,
  META_KEY,
  modernCall,
  queryRows,
  readCounter,
  SDK1,
  SDK2,
  textOf,
  waitForReady,
  type Answer,
  type Json,
  type LegacyRaw,
} from './ledger-helpers.js';

let dir: string;
let hub: HubProcess;
let db: string;
let legacy: LegacyRaw;
const counterF = () => readCounter(join(dir, 'counter-f.json'));
const counterM = () => readCounter(join(dir, 'counter-m.json'));

function config(): Json {
  return {
    servers: {
      f: fixture(SDK1, dir, {}, join(dir, 'counter-f.json')),
      m: fixture(SDK2, dir, {}, join(dir, 'counter-m.json')),
      // SDK1 until the file `down` exists: then it cannot start again.
      d: { command: process.execPath, args: [join(dir, 'downable.mjs')], env: { COUNTER_FILE: join(dir, 'counter-d.json') } },
    },
  };
}

async function boot(): Promise<void> {
  hub = await startHub(config(), { dir });
  await waitForReady(hub.url, ['f', 'm']);
  legacy = await legacySession(hub.url);
  expect((await legacy.call('list', 'tools/list')).body?.result?.tools).toBeDefined();
}

/** Outcomes of the rows carrying this key, in id order. */
async function outcomesOf(key: string): Promise<string[]> {
  return (await queryRows(db))
    .filter((r) => r.idempotencyKey === key)
    .sort((a, b) => a.id - b.id)
    .map((r) => r.outcome);
}

function resultOf(a: Answer): Json {
  expect(a.body?.error).toBeUndefined();
  return a.body!.result!;
}

/** The result without the era envelope, to compare answers across eras. */
function bare(r: Json): Json {
  const { _meta: _m, resultType: _r, ...rest } = r;
  return rest;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'switchyard-ledger-idem-'));
  db = join(dir, 'ledger.db');
  writeFileSync(
    join(dir, 'downable.mjs'),
    `import { existsSync } from 'node:fs';\nif (existsSync(${JSON.stringify(join(dir, 'down'))})) process.exit(1);\nawait import(${JSON.stringify(pathToFileURL(join(ROOT, SDK1)).href)});\n`,
  );
  await boot();
}, 40_000);

afterAll(async () => {
  await hub?.stop();
});

describe('idempotency keys through the hub', () => {
  it('header form, sequential: one upstream run, the same answer three times', async () => {
    const h = { 'idempotency-key': 'hdr-seq' };
    const answers: Json[] = [];
    for (let i = 1; i <= 3; i++) answers.push(resultOf(await legacy.call(`hs-${i}`, 'tools/call', { name: 'f__counter_bump', arguments: { label: 'hdr-seq' } }, h)));
    expect(answers[0].structuredContent).toEqual({ label: 'hdr-seq', count: 1 });
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[2]).toEqual(answers[0]);
    expect(counterF()['hdr-seq']).toBe(1);
    expect(await outcomesOf('hdr-seq')).toEqual(['ok', 'replayed', 'replayed']);
  });

  it('`ledger keys` shows a key created when its call began, before the upstream ran it, and ended when it ended', async () => {
    const key = 'created-at-start';
    resultOf(await legacy.call('cs-1', 'tools/call', { name: 'f__slow', arguments: { ms: 1000 } }, { 'idempotency-key': key }));
    const [row] = (await queryRows(db)).filter((r) => r.idempotencyKey === key);
    // The answer reaches the client as the key's end is committed, not after: read once it is.
    let shown: Json = {};
    for (let i = 0; i < 200 && shown.state !== 'done'; i++) {
      const r = await ledgerInProcess(db, ['keys', '--key', key, '--json']);
      shown = r.stdout ? (JSON.parse(r.stdout) as Json) : {};
      if (shown.state !== 'done') await new Promise((r) => setTimeout(r, 25));
    }
    expect(shown).toMatchObject({ key, state: 'done' });
    const created = Date.parse(shown.created as string);
    const ended = Date.parse(shown.ended as string);
    // Claimed as the request arrived (its row's ts), before the upstream slept its second.
    expect(created).toBeGreaterThanOrEqual(Date.parse(row!.ts));
    expect(ended - created).toBeGreaterThanOrEqual(1000);
  });

  it('_meta form, sequential, from an SDK v2 client to a modern upstream', async () => {
    const v2 = new ClientV2({ name: 'idem-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await v2.connect(new TransportV2(new URL(hub.url)));
    try {
      const call = () => v2.callTool({ name: 'm__counter_bump', arguments: { label: 'meta-seq' }, _meta: { [META_KEY]: 'meta-seq' } });
      const a = await call();
      const b = await call();
      const c = await call();
      expect(a.structuredContent).toEqual({ label: 'meta-seq', count: 1 });
      expect(bare(b as Json)).toEqual(bare(a as Json));
      expect(bare(c as Json)).toEqual(bare(a as Json));
      expect(counterM()['meta-seq']).toBe(1);
      expect(await outcomesOf('meta-seq')).toEqual(['ok', 'replayed', 'replayed']);
    } finally {
      await v2.close();
    }
  });

  it('header form, 10 concurrent modern requests: one run, ten equal answers', async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        modernCall(hub.url, `hc-${i}`, 'tools/call', { name: 'f__counter_bump', arguments: { label: 'hdr-conc' } }, { headers: { 'idempotency-key': 'hdr-conc' } }),
      ),
    );
    const results = answers.map(resultOf);
    expect(results[0].structuredContent).toEqual({ label: 'hdr-conc', count: 1 });
    for (const r of results) expect(r).toEqual(results[0]);
    expect(counterF()['hdr-conc']).toBe(1);
    const outcomes = await outcomesOf('hdr-conc');
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'replayed')).toHaveLength(9);
  });

  it('_meta form, 10 concurrent requests in one legacy session: one run, ten equal answers', async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        legacy.call(`mc-${i}`, 'tools/call', { name: 'f__counter_bump', arguments: { label: 'meta-conc' }, _meta: { [META_KEY]: 'meta-conc' } }),
      ),
    );
    const results = answers.map(resultOf);
    expect(results[0].structuredContent).toEqual({ label: 'meta-conc', count: 1 });
    for (const r of results) expect(r).toEqual(results[0]);
    expect(counterF()['meta-conc']).toBe(1);
    const outcomes = await outcomesOf('meta-conc');
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'replayed')).toHaveLength(9);
  });

  it('a key reused with other arguments or for another tool is refused, naming the conflict; the upstream is not called', async () => {
    const h = { 'idempotency-key': 'conflict-k' };
    const first = resultOf(await legacy.call('c1', 'tools/call', { name: 'f__counter_bump', arguments: { label: 'conflict-a' } }, h));
    expect(first.isError).toBeFalsy();
    const otherArgs = resultOf(await legacy.call('c2', 'tools/call', { name: 'f__counter_bump', arguments: { label: 'conflict-b' } }, h));
    expect(otherArgs.isError).toBe(true);
    expect(textOf(otherArgs)).toContain('"conflict-k"');
    expect(textOf(otherArgs)).toContain('other arguments');
    const otherTool = resultOf(
      await modernCall(hub.url, 'c3', 'tools/call', { name: 'm__counter_bump', arguments: { label: 'conflict-c' } }, { meta: { [META_KEY]: 'conflict-k' } }),
    );
    expect(otherTool.isError).toBe(true);
    expect(textOf(otherTool)).toContain('tool "f__counter_bump"');
    expect(counterF()).not.toHaveProperty('conflict-b');
    expect(counterM()).not.toHaveProperty('conflict-c');
    expect(counterF()['conflict-a']).toBe(1);
    expect(await outcomesOf('conflict-k')).toEqual(['ok', 'denied', 'denied']);
  });

  it('a key whose call the hub timed out is refused as unknown, in words true of a timeout', async () => {
    const slow = (id: string) =>
      modernCall(hub.url, id, 'tools/call', { name: 'f__slow', arguments: { ms: 1500 } }, { meta: { [META_KEY]: 'timed-out-k', 'dev.switchyard/timeoutMs': 200 } });
    const first = resultOf(await slow('t1'));
    expect(first.isError).toBe(true);
    expect(textOf(first)).toMatch(/did not finish within its limit of 200 ms/);
    const again = resultOf(await slow('t2'));
    expect(again.isError).toBe(true);
    // Nothing stopped: the hub stopped waiting. The refusal names that among the ways.
    expect(textOf(again)).toBe(
      'idempotency key "timed-out-k" belongs to an earlier call whose outcome is unknown: it may have run, but it left no answer to replay ' +
        '(it timed out, was cancelled or cut off, lost its connection to the server or was failed by it (an HTTP 5xx), the hub failed or stopped during it, or its answer could not be stored); ' +
        'check the effect, then use a new key',
    );
    expect(await outcomesOf('timed-out-k')).toEqual(['timeout', 'denied']);
  });

  it('a duplicate that waited for a first call ending unknown is refused, its row saying how long it waited (it said 0 ms)', async () => {
    const slow = (id: string) =>
      modernCall(hub.url, id, 'tools/call', { name: 'f__slow', arguments: { ms: 1500 } }, { meta: { [META_KEY]: 'waited-unknown-k', 'dev.switchyard/timeoutMs': 600 } });
    const first = slow('wu1');
    const reader = new Database(db, { readonly: true });
    try {
      // The first call's row has begun before its duplicate is sent: the duplicate waits for it.
      for (let i = 0; i < 500 && !reader.prepare(`SELECT 1 FROM audit WHERE request_id = 'wu1'`).get(); i++) await new Promise((r) => setTimeout(r, 10));
    } finally {
      reader.close();
    }
    const sentAt = performance.now();
    const dup = resultOf(await slow('wu2'));
    const waited = performance.now() - sentAt;
    expect(textOf(resultOf(await first))).toMatch(/did not finish within its limit of 600 ms/);
    expect([dup.isError, textOf(dup)]).toEqual([true, expect.stringContaining('outcome is unknown')]);
    const rows = (await queryRows(db)).filter((r) => r.idempotencyKey === 'waited-unknown-k').sort((a, b) => a.id - b.id);
    expect(rows.map((r) => r.outcome)).toEqual(['timeout', 'denied']);
    // It waited for the first call's end (up to its 600 ms limit), and its row says so.
    expect(waited).toBeGreaterThan(100);
    expect(rows[1].latencyMs).toBeGreaterThan(100);
    expect(rows[1].latencyMs).toBeLessThanOrEqual(waited + 1);
  });

  it('a key that is not a non-empty string is refused (-32602), not ignored: the upstream is not called', async () => {
    for (const [i, key] of ([12345, { id: 'k' }, ''] as unknown[]).entries()) {
      const r = await modernCall(hub.url, `bad-key-${i}`, 'tools/call', { name: 'm__counter_bump', arguments: { label: 'bad-key' } }, { meta: { [META_KEY]: key } });
      expect(r.body?.error, JSON.stringify(r.body)).toMatchObject({ code: -32602, message: expect.stringContaining('must be a non-empty string') });
    }
    expect(counterM()).not.toHaveProperty('bad-key');
  });

  it('an Idempotency-Key header beside a _meta key naming another is refused (-32602) in both eras, not half ignored: the upstream is not called', async () => {
    const args = { name: 'm__counter_bump', arguments: { label: 'clash' } };
    const modern = await modernCall(hub.url, 'clash-1', 'tools/call', args, { meta: { [META_KEY]: 'clash-meta' }, headers: { 'idempotency-key': 'clash-hdr' } });
    const old = await legacy.call('clash-2', 'tools/call', { ...args, _meta: { [META_KEY]: 'clash-meta' } }, { 'idempotency-key': 'clash-hdr' });
    for (const r of [modern, old]) expect(r.body?.error, JSON.stringify(r.body)).toMatchObject({ code: -32602, message: expect.stringContaining('name different keys') });
    expect(counterM()).not.toHaveProperty('clash');
    // The same key in both is one key: it runs once and replays.
    const same = { meta: { [META_KEY]: 'clash-same' }, headers: { 'idempotency-key': 'clash-same' } };
    expect(resultOf(await modernCall(hub.url, 'clash-3', 'tools/call', args, same)).structuredContent).toEqual({ label: 'clash', count: 1 });
    expect(resultOf(await modernCall(hub.url, 'clash-4', 'tools/call', args, { headers: { 'idempotency-key': 'clash-same' } })).structuredContent).toEqual({ label: 'clash', count: 1 });
    expect(counterM().clash).toBe(1);
  });

  it('a key is replayed by a new daemon after the old one was SIGKILLed', async () => {
    const h = { 'idempotency-key': 'restart-k' };
    const before = resultOf(await legacy.call('r1', 'tools/call', { name: 'f__counter_bump', arguments: { label: 'restart' } }, h));
    expect(before.structuredContent).toEqual({ label: 'restart', count: 1 });
    // The answer was sent only after its row and the key's answer were committed.
    expect(await hub.stop('SIGKILL')).toBeNull();
    await boot();
    const after = resultOf(await legacy.call('r2', 'tools/call', { name: 'f__counter_bump', arguments: { label: 'restart' } }, h));
    expect(after).toEqual(before);
    expect(counterF().restart).toBe(1);
    expect(await outcomesOf('restart-k')).toEqual(['ok', 'replayed']);
    // Keys from before the restart still hold too.
    const old = resultOf(await legacy.call('r3', 'tools/call', { name: 'f__counter_bump', arguments: { label: 'hdr-seq' } }, { 'idempotency-key': 'hdr-seq' }));
    expect(old.structuredContent).toEqual({ label: 'hdr-seq', count: 1 });
    expect(counterF()['hdr-seq']).toBe(1);
  });

  it('a client that gives up on a keyed call and sends it again gets its answer: the first is not cancelled under the retry waiting for it', async () => {
    const reader = new Database(db, { readonly: true });
    const rowOf = (requestId: string) => reader.prepare(`SELECT 1 FROM audit WHERE idempotency_key = 'gave-up' AND request_id = ?`).get(requestId);
    const until = async (ok: () => unknown): Promise<void> => {
      for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
      expect(ok()).toBeTruthy();
    };
    try {
      const slow = { name: 'f__slow', arguments: { ms: 1000 } };
      const headers = { 'idempotency-key': 'gave-up' };
      const ac = new AbortController();
      const first = modernCall(hub.url, 'gu1', 'tools/call', slow, { headers, signal: ac.signal }).catch((err: Error) => err.name);
      await until(() => rowOf('gu1'));
      const retry = modernCall(hub.url, 'gu2', 'tools/call', slow, { headers });
      await until(() => rowOf('gu2')); // its row began: it waits for the first call's answer
      ac.abort(); // the client gives up on the first request
      expect(await first).toBe('AbortError');
      expect(textOf(resultOf(await retry))).toBe('slept 1000');
      expect(await outcomesOf('gave-up')).toEqual(['ok', 'replayed']);
    } finally {
      reader.close();
    }
  });

  it("a key whose call ended is answered from it while its server is down (not 'unavailable' for a call that ran)", async () => {
    await waitForReady(hub.url, ['d']);
    const call = (id: string, headers: Record<string, string> = { 'idempotency-key': 'down-k' }) =>
      modernCall(hub.url, id, 'tools/call', { name: 'd__counter_bump', arguments: { label: 'down' } }, { headers });
    const first = resultOf(await call('d1'));
    expect(first.structuredContent).toEqual({ label: 'down', count: 1 });
    writeFileSync(join(dir, 'down'), '');
    expect(existsSync(join(dir, 'down'))).toBe(true);
    await fetch(new URL('/admin/servers/d/restart', hub.url), { method: 'POST' }); // its first attempt fails
    expect((await health(hub.url)).servers.find((x) => x.id === 'd')?.state).not.toBe('ready');
    const unkeyed = resultOf(await call('d2', {}));
    expect([unkeyed.isError, textOf(unkeyed)]).toEqual([true, expect.stringMatching(/^Tool d__counter_bump is unavailable/)]);
    expect(bare(resultOf(await call('d3')))).toEqual(bare(first));
    expect(readCounter(join(dir, 'counter-d.json')).down).toBe(1);
    expect(await outcomesOf('down-k')).toEqual(['ok', 'replayed']);
    // The replay's row names the server, as the call's does.
    expect((await queryRows(db)).filter((r) => r.idempotencyKey === 'down-k').map((r) => r.server)).toEqual(['d', 'd']);
  });

  // Hub-level impossible for now: every caller is `anonymous` until auth exists. So the hub's
  // own ledger file is opened directly and asked as a second principal.
  it("one principal's key never replays another's result (ledger level, on the hub-written file)", async () => {
    await hub.stop();
    const ledger = Ledger.open({ path: db });
    try {
      const hash = argsHash({ label: 'hdr-seq' });
      const mine = ledger.idempotency.claim('anonymous', 'hdr-seq', 'f__counter_bump', hash);
      expect(mine.kind).toBe('replay');
      if (mine.kind === 'replay') expect((mine.answer as { result: Json }).result.structuredContent).toEqual({ label: 'hdr-seq', count: 1 });
      const theirs = ledger.idempotency.claim('mallory', 'hdr-seq', 'f__counter_bump', hash);
      expect(theirs.kind).toBe('new');
      ledger.idempotency.abandon('mallory', 'hdr-seq');
    } finally {
      await ledger.close();
    }
  });
});
