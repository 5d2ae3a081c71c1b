/**
 * Another process holds the ledger database's write lock (an operator's `sqlite3` shell left in
 * a write transaction, a tool that writes the file) under a running hub. Calls with no key go
 * on (their rows wait in the pending file); a keyed call, whose key must be in SQLite before it
 * is forwarded, is refused with an error naming the ledger and the lock, not an anonymous
 * "internal error", its row says it was refused (not `unknown`: it never ran), and its key is
 * free for the retry once the lock is let go, which runs it once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { exportRows, fixture, modernCall, readCounter, SDK1, textOf, waitForReady } from './ledger-helpers.js';

let hub: HubProcess | undefined;
let holder: ChildProcess | undefined;
afterAll(async () => {
  holder?.kill('SIGKILL');
  await hub?.stop();
});

/** A process holding `db`'s write lock until its stdin closes; resolves once it holds it. */
async function holdWriteLock(db: string): Promise<ChildProcess> {
  const p = spawn(process.execPath, [join(ROOT, 'test/fixtures/ledger/sqlite-write-holder.mjs'), db], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    p.stdout!.once('data', () => resolve());
    p.once('exit', (code) => reject(new Error(`the lock holder exited with ${code}`)));
  });
  return p;
}

async function release(p: ChildProcess): Promise<void> {
  const exited = new Promise((r) => p.once('exit', r));
  p.stdin!.end();
  await exited;
}

describe('the ledger database write-locked by another process', () => {
  it('refuses a keyed call naming the ledger and its lock, records it refused, and frees its key for the retry', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-ledger-lock-held-'));
    const db = join(dir, 'ledger.db');
    const counter = join(dir, 'counter.json');
    hub = await startHub({ servers: { f: fixture(SDK1, dir) } }, { dir });
    await waitForReady(hub.url, ['f']);
    const call = (id: string) => modernCall(hub!.url, id, 'tools/call', { name: 'f__counter_bump', arguments: { label: 'locked' } }, { headers: { 'idempotency-key': 'lock-k' } });

    holder = await holdWriteLock(db);
    const refused = await call('while-locked');
    expect(refused.body?.error?.code).toBe(-32603);
    expect(refused.body?.error?.message).toMatch(/^the audit ledger cannot write \(SQLITE_BUSY: another process holds the ledger database's write lock\); the hub does not run calls it cannot record/);
    expect(readCounter(counter).locked).toBeUndefined();
    // Once a write was refused for the lock, the hub does not wait it out again on its event
    // loop (5 s for the claim, 5 s more for its release, every request stalled meanwhile): a
    // second keyed call is refused at once, and a call without a key, which needs no SQLite
    // write, is answered.
    const t0 = performance.now();
    const again = await call('still-locked');
    expect(performance.now() - t0).toBeLessThan(2_500);
    expect(again.body?.error?.message).toContain('SQLITE_BUSY');
    const echo = await modernCall(hub.url, 'echo-while-locked', 'tools/call', { name: 'f__echo', arguments: { text: 'x' } });
    expect(textOf(echo.body?.result), JSON.stringify(echo.body)).toBe('echo:x');
    await release(holder);
    holder = undefined;

    const ran = await call('after-release');
    expect(textOf(ran.body?.result)).toBe('1');
    const replayed = await call('replayed');
    expect(textOf(replayed.body?.result)).toBe('1');
    expect(readCounter(counter).locked).toBe(1);

    const rows = (await exportRows(db)).filter((r) => r.idempotencyKey === 'lock-k').sort((a, b) => a.id - b.id);
    expect(rows.map((r) => [r.requestId, r.outcome, r.errorCode])).toEqual([
      ['while-locked', 'rpc_error', -32603],
      ['still-locked', 'rpc_error', -32603],
      ['after-release', 'ok', null],
      ['replayed', 'replayed', null],
    ]);
    expect(rows[0]!.errorMessage).toContain('SQLITE_BUSY');
  }, 60_000);
});
