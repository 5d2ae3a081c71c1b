/**
 * `switchyard ledger` on an evidence copy: a ledger file copied to a folder its reader cannot
 * write. SQLite reads a WAL database through a -shm file it creates beside it, so such a copy
 * is opened immutable (src/ledger/db.ts, openReadOnly).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { runCli, type CliRun } from '../helpers/cli.js';

const undo: (() => void)[] = [];
afterEach(() => {
  for (const f of undo.splice(0).reverse()) f();
});

const ROOT_USER = process.getuid?.() === 0;
/** Root writes through any mode: without these capabilities, modes bind it as they bind a user. */
const AS_OWNER = ['setpriv', '--bounding-set', '-dac_override,-dac_read_search'];

/** A way to make a folder one the CLI cannot write, and to run the CLI there. */
interface ReadOnly {
  name: string;
  /** Makes `dir` so (undone after the test); false when this machine cannot. */
  make(dir: string): boolean;
  wrap: string[];
}

const WAYS: ReadOnly[] = [
  {
    // Read-only media: SQLite says SQLITE_CANTOPEN. Needs mounts (root, and a machine that allows them).
    name: 'a read-only file system',
    wrap: [],
    make(dir) {
      if (!ROOT_USER || spawnSync('mount', ['--bind', dir, dir]).status !== 0) return false;
      undo.push(() => spawnSync('umount', [dir]));
      return spawnSync('mount', ['-o', 'remount,ro,bind', dir]).status === 0;
    },
  },
  {
    // A folder its reader may not write: SQLite says SQLITE_READONLY_DIRECTORY.
    name: 'a folder without write permission',
    wrap: ROOT_USER ? AS_OWNER : [],
    make(dir) {
      chmodSync(dir, 0o555);
      undo.push(() => chmodSync(dir, 0o755));
      return true;
    },
  },
];

/** `make`, checked: the CLI's user (wrapped as the CLI runs) cannot create a file there. */
function madeReadOnly(way: ReadOnly, dir: string): boolean {
  if (!way.make(dir)) return false;
  const [file, ...args] = [...way.wrap, process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(join(dir, 'probe'))}, '')`];
  const probe = spawnSync(file!, args);
  return probe.error === undefined && probe.status !== 0; // not when the wrapper itself is missing
}

/** A ledger with `n` finished calls, at `path`. */
async function ledgerWith(path: string, n: number): Promise<Ledger> {
  const ledger = Ledger.open({ path });
  for (let i = 0; i < n; i++) {
    const h = ledger.begin({ ts: Date.now(), requestId: `r${i}`, principal: 'alice', clientEra: '2025-11-25', method: 'tools/call', hubName: 'notes__write', server: 'notes', upstreamName: 'write' });
    await h.finish({ outcome: 'ok', errorKind: null, latencyMs: 2 });
  }
  return ledger;
}

const tempDir = (): string => mkdtempSync(join(tmpdir(), 'switchyard-evidence-'));
const CANNOT = 'this machine cannot make a folder read-only this way for the user running the tests';

describe.each(WAYS)('ledger evidence copy in $name', (way) => {
  const cli = (args: string[]): Promise<CliRun> => runCli(args, { wrap: way.wrap });

  it('verify and query read a cleanly closed ledger copied there', async (ctx) => {
    const original = join(tempDir(), 'ledger.db');
    await (await ledgerWith(original, 3)).close();
    const head = /^head: (\S+)$/m.exec((await runCli(['ledger', '--db', original, 'verify'])).stdout)![1]!;
    const evidence = tempDir();
    copyFileSync(original, join(evidence, 'ledger.db'));
    if (!madeReadOnly(way, evidence)) return ctx.skip(CANNOT);

    const verified = await cli(['ledger', '--db', join(evidence, 'ledger.db'), 'verify', '--witness', head]);
    expect(verified.stderr).toBe('');
    expect(verified.stdout).toBe(`ok: 3 rows verified (chain seq 1..3), 1 witness held\nhead: ${head}\n`);
    expect(verified.code).toBe(0);
    const queried = await cli(['ledger', '--db', join(evidence, 'ledger.db'), 'query', '--json']);
    expect(queried.stderr).toBe('');
    expect(queried.stdout.trim().split('\n').map((l) => JSON.parse(l).requestId).sort()).toEqual(['r0', 'r1', 'r2']);
    expect(readdirSync(evidence)).toEqual(['ledger.db']);
  });

  it('a copy whose -wal still holds commits is refused saying so, not read without them', async (ctx) => {
    const original = join(tempDir(), 'ledger.db');
    const ledger = await ledgerWith(original, 3);
    ledger.sync(); // into SQLite: its WAL
    const evidence = tempDir();
    try {
      // Copied while its hub ran (or after the hub was killed): the database and its WAL.
      for (const f of ['ledger.db', 'ledger.db-wal']) copyFileSync(`${original}${f.slice('ledger.db'.length)}`, join(evidence, f));
    } finally {
      await ledger.close();
    }
    expect(statSync(join(evidence, 'ledger.db-wal')).size).toBeGreaterThan(0);
    if (!madeReadOnly(way, evidence)) return ctx.skip(CANNOT);

    const r = await cli(['ledger', '--db', join(evidence, 'ledger.db'), 'verify']);
    expect(r.stderr).toMatch(/its -wal file holds commits not yet in the database .*copy it with its -wal to a folder that can be written/);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe('');
  });
});
