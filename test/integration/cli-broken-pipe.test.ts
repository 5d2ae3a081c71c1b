/**
 * The CLI's output piped into a reader that stops early (`| head -1`), as an operator does:
 * the command ends quietly, exit 0, with no EPIPE stack trace on stderr.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { beforeAll, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { BIN } from '../helpers/hub-process.js';
import { begin, end } from '../unit/ledger-helpers.js';
import { freePortInRange } from '../helpers/port-range.js';

/**
 * `switchyard …args | head -1` in bash: the CLI's exit code and stderr, and what head printed.
 * `onHead`: called when head's line arrives (the command is running and has written).
 */
function piped(args: string[], onHead?: () => void): Promise<{ code: number; stderr: string; head: string }> {
  return new Promise((resolve) => {
    const script = `"$0" "$@" 2>"$ERR_FILE" | head -1; echo "rc=\${PIPESTATUS[0]}"; cat "$ERR_FILE" >&2`;
    const err = join(mkdtempSync(join(tmpdir(), 'switchyard-pipe-')), 'stderr');
    const p = spawn('bash', ['-c', script, process.execPath, BIN, ...args], { env: { ...process.env, ERR_FILE: err, SWITCHYARD_LOG_LEVEL: 'warn' } });
    let out = '';
    let stderr = '';
    p.stdout.on('data', (d) => {
      if (!out) onHead?.();
      out += d;
    });
    p.stderr.on('data', (d) => (stderr += d));
    p.on('exit', () => {
      const lines = out.trim().split('\n');
      resolve({ code: Number(lines.pop()!.replace('rc=', '')), stderr, head: lines.join('\n') });
    });
  });
}

/** `switchyard …args 2>&1 | true` in bash, in `cwd`: the CLI's exit code (its stderr goes to the pipe, whose reader is gone). */
function bothPipedIntoTrue(args: string[], cwd: string): Promise<number> {
  return new Promise((resolve) => {
    const p = spawn('bash', ['-c', `"$0" "$@" 2>&1 | true; echo "rc=\${PIPESTATUS[0]}"`, process.execPath, BIN, ...args], { cwd, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('exit', () => resolve(Number(out.trim().replace('rc=', ''))));
  });
}

describe('output piped into head', () => {
  let db: string;
  beforeAll(async () => {
    db = join(mkdtempSync(join(tmpdir(), 'switchyard-pipe-ledger-')), 'ledger.db');
    // Far more than a pipe holds (64 KiB): the writes go on after head has gone.
    const ledger = Ledger.open({ path: db, storeBodies: true });
    for (let i = 0; i < 3000; i++) await ledger.record(begin({ args: { text: 'x'.repeat(200), i } }), end());
    await ledger.close();
    const raw = new Database(db);
    const put = raw.prepare(`INSERT INTO idempotency (principal, key, tool, args_hash, state, created_ms, completed_ms) VALUES ('alice', ?, 'fs__write', 'ab', 'done', ?, ?)`);
    raw.transaction(() => {
      for (let i = 0; i < 3000; i++) put.run(`key-${i}-${'k'.repeat(100)}`, 1_800_000_000_000 + i, 1_800_000_000_000 + i);
    })();
    raw.close();
  }, 120_000);

  it.each([
    ['ledger export', ['ledger', 'export'], /^\{"id":/],
    ['ledger query --limit 3000', ['ledger', 'query', '--limit', '3000', '--json'], /^\{"id":/],
    // Written a page at a time (reader.keyIds): the writes go on after head has gone.
    ['ledger keys --limit 3000', ['ledger', 'keys', '--limit', '3000', '--json'], /^\{"principal":"alice","group":null,"key":"key-2999-/],
  ])('%s | head -1 ends quietly, exit 0', async (_name, args, first) => {
    const r = await piped([...args, '--db', db]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.head).toMatch(first);
  });

  it('ledger tail -f | head -1 ends quietly, exit 0: at once when its first rows fill the pipe, else at the next row it writes', async () => {
    // The first rows more than a pipe holds: EPIPE while they are written.
    const full = await piped(['ledger', 'tail', '-f', '-n', '3000', '--json', '--db', db]);
    expect([full.code, full.stderr]).toEqual([0, '']);
    expect(full.head).toMatch(/^\{"id":/);
    // Ten rows fit in the pipe: head takes its line and goes, tail waits for the next call. Node
    // cannot see the reader of an idle pipe go (README), so calls finish until one finds it gone.
    const follow = join(mkdtempSync(join(tmpdir(), 'switchyard-pipe-follow-')), 'ledger.db');
    // Closed once written, so that they are in the database when tail starts: rows still on
    // their way from a writer that holds no hub's lock are a stopped hub's to tail (a note).
    const first = Ledger.open({ path: follow });
    for (let i = 0; i < 10; i++) await first.record(begin(), end());
    await first.close();
    const ledger = Ledger.open({ path: follow });
    try {
      let ended = false;
      let headed!: () => void;
      const headLine = new Promise<void>((r) => (headed = r));
      const tail = piped(['ledger', 'tail', '-f', '--db', follow], headed).finally(() => (ended = true));
      // Once tail has begun (a row on its way as it starts would be noted as a stopped hub's: this
      // writer holds no hub's lock), one call at a time until it has ended (the test's timeout bounds it).
      await Promise.race([headLine, tail]);
      let rows = 0;
      while (!ended) {
        await ledger.record(begin(), end());
        rows++;
        await Promise.race([tail, new Promise((r) => setTimeout(r, 100))]);
      }
      const r = await tail;
      expect([r.code, r.stderr]).toEqual([0, '']);
      expect(r.head).toMatch(/^time +principal/);
      expect(rows).toBeGreaterThan(0);
    } finally {
      await ledger.close();
    }
  }, 60_000);

  it('stderr piped along (2>&1) into a reader already gone: exit 0, not an uncaught EPIPE', async () => {
    // `tools --format` with no daemon says so on stderr before anything reaches stdout: that
    // first write finds the reader gone (it was exit 1, an uncaught 'error' on stderr).
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-pipe-cfg-'));
    const unused = await freePortInRange(); // nothing listens there
    writeFileSync(join(dir, 'hub.config.json'), JSON.stringify({ listen: { port: unused }, ledger: { enabled: false }, servers: {} }));
    expect(await bothPipedIntoTrue(['tools', '--format', 'openai'], dir)).toBe(0);
  });
});
