/**
 * Acceptance: SIGKILL of the daemon under load. 20 clients loop over `slow` and `echo` calls
 * through the real hub; the hub is killed mid-stream and started again on the same folder.
 * Every call that got an answer has its finished row (matched by request id and arguments),
 * calls cut off in flight are `unknown`, nothing stays `in_flight`, and `ledger verify` passes.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { argsHash } from '../../src/ledger/canonical.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { exportRows, fixture, ledgerCli, modernCall, SDK1, sleep, textOf, waitForReady, type Json } from './ledger-helpers.js';

const WORKERS = 20;

interface Sent {
  id: string;
  tool: string;
  args: Json;
  answered?: Json;
}

let hub: HubProcess | undefined;
afterAll(async () => {
  await hub?.stop();
});

describe('SIGKILL under load', () => {
  it('keeps a row for every answered call, marks in-flight calls unknown, and still verifies', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-ledger-crash-'));
    const db = join(dir, 'ledger.db');
    const config = { servers: { f: fixture(SDK1, dir) } };
    hub = await startHub(config, { dir });
    await waitForReady(hub.url, ['f']);
    const url = hub.url;

    const sent: Sent[] = [];
    let stop = false;
    const worker = async (w: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const slow = (w + i) % 2 === 0;
        const s: Sent = slow
          ? { id: `w${w}-${i}`, tool: 'f__slow', args: { ms: 30 + ((w * 37 + i * 11) % 250) } }
          : { id: `w${w}-${i}`, tool: 'f__echo', args: { text: `w${w}-${i}` } };
        sent.push(s);
        try {
          const a = await modernCall(url, s.id, 'tools/call', { name: s.tool, arguments: s.args }, { clientName: `worker-${w}` });
          if (a.body?.result) s.answered = a.body.result;
        } catch {
          return; // the hub is gone
        }
      }
    };
    const running = Array.from({ length: WORKERS }, (_, w) => worker(w));
    // One keyed call that is surely in flight at the kill.
    const keyed = modernCall(url, 'keyed', 'tools/call', { name: 'f__slow', arguments: { ms: 20_000 } }, { headers: { 'idempotency-key': 'crash-k' } }).catch(() => undefined);
    // Kill once plenty of calls have completed, at a moment when many are in flight.
    const deadline = Date.now() + 10_000;
    while (sent.filter((s) => s.answered).length < 150 && Date.now() < deadline) await sleep(20);
    expect(await hub.stop('SIGKILL')).toBeNull();
    stop = true;
    await Promise.all([...running, keyed]);

    const answered = sent.filter((s) => s.answered);
    expect(answered.length).toBeGreaterThanOrEqual(150);
    for (const s of answered) expect(textOf(s.answered)).toBe(s.tool === 'f__echo' ? `echo:${String(s.args.text)}` : `slept ${String(s.args.ms)}`);

    // Before any restart, a reader sees calls the dead hub left in flight.
    const dead = await exportRows(db);
    const inFlight = dead.filter((r) => r.outcome === 'in_flight');
    expect(inFlight.length).toBeGreaterThan(0);

    // A new daemon on the same folder: recovery turns in-flight rows into `unknown`.
    hub = await startHub(config, { dir });
    await waitForReady(hub.url, ['f']);
    const rows = await exportRows(db);
    const calls = rows.filter((r) => r.method === 'tools/call');
    const byRequest = new Map(calls.map((r) => [r.requestId, r]));
    expect(byRequest.size).toBe(calls.length); // request ids are unique in this test

    for (const s of answered) {
      const r = byRequest.get(s.id);
      expect(r, `row for answered call ${s.id}`).toBeDefined();
      expect(r).toMatchObject({ outcome: 'ok', tool: s.tool, server: 'f', argsHash: argsHash(s.args), clientName: `worker-${s.id.split('-')[0].slice(1)}` });
      expect(r!.seq).toBeGreaterThan(0);
    }
    expect(rows.filter((r) => r.outcome === 'in_flight')).toEqual([]);
    const unknown = calls.filter((r) => r.outcome === 'unknown');
    expect(unknown.length).toBeGreaterThan(0);
    // What the dead hub had not yet moved into SQLite came back from its pending file: a call a
    // reader saw in flight may have finished before the kill (its finish was in the file), and
    // calls begun since the last move are there too. None is lost, none stays in flight.
    const byId = new Map(calls.map((r) => [r.id, r]));
    for (const r of inFlight) expect(['unknown', 'ok']).toContain(byId.get(r.id)?.outcome);
    const answeredIds = new Set(answered.map((s) => s.id));
    for (const r of unknown) {
      expect(answeredIds.has(String(r.requestId))).toBe(false);
      expect(r.errorMessage).toContain('stopped before this call finished');
      expect(r.seq).toBeGreaterThan(0);
    }
    // Every row belongs to a call some worker sent, with the arguments it sent.
    const sentById = new Map(sent.map((s) => [s.id, s]));
    for (const r of calls.filter((c) => c.requestId !== 'keyed')) expect(r.argsHash).toBe(argsHash(sentById.get(String(r.requestId))!.args));
    expect(byRequest.get('keyed')).toMatchObject({ outcome: 'unknown', idempotencyKey: 'crash-k' });
    expect(hub.logs.some((l) => l.includes('marked unknown'))).toBe(true);

    const v = await ledgerCli(db, ['verify']);
    expect(v.code, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toMatch(/^ok: /);

    // A retry with the key of a call cut off mid-flight is refused: it may have run.
    const retry = await modernCall(hub.url, 'keyed-retry', 'tools/call', { name: 'f__slow', arguments: { ms: 20_000 } }, { headers: { 'idempotency-key': 'crash-k' } });
    expect(retry.body?.result?.isError).toBe(true);
    expect(textOf(retry.body?.result)).toContain('outcome is unknown');

    // The new daemon records on top of the recovered chain.
    const after = await modernCall(hub.url, 'after-restart', 'tools/call', { name: 'f__echo', arguments: { text: 'again' } });
    expect(textOf(after.body?.result)).toBe('echo:again');
    const v2 = await ledgerCli(db, ['verify']);
    expect(v2.code, v2.stdout).toBe(0);
  }, 40_000);
});
