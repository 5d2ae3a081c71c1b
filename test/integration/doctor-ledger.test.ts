/**
 * doctor checks the ledger's hash chain: a ledger written by the real hub verifies; after a
 * row is altered behind the hub's back, doctor names the broken row and fails. And it checks
 * what `switchyard start` needs of the ledger: a folder it can create and write, a writable
 * file, a lock no other running hub holds; each ledger start refuses, doctor fails too.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, runCliBatch } from '../helpers/cli.js';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

function doctor(cwd: string): Promise<{ code: number | null; findings: Record<string, string>[] }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [BIN, 'doctor', '--json'], { cwd, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'silent' } });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('exit', (code) => resolve({ code, findings: JSON.parse(out) }));
  });
}

describe('doctor and upstream logins', () => {
  it('says that a server of oauth.grant authorization_code has no login stored, and how to make one', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-doctor-login-'));
    writeFileSync(join(d, 'hub.config.json'), JSON.stringify({ listen: { port: 0 }, ledger: { path: './ledger.db' }, servers: { u: { url: 'http://127.0.0.1:1/mcp', oauth: { grant: 'authorization_code', clientId: 'c' } } } }));
    const { findings } = await doctor(d);
    expect(findings).toContainEqual({ level: 'warn', check: 'login', message: 'servers.u: no login stored (oauth.grant authorization_code): its calls fail until you run `switchyard login u`' });
  }, 30_000);
});

describe('doctor and the ledger', () => {
  it('verifies a healthy chain and names the row of a tampered one', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-doctor-ledger-'));
    writeFileSync(join(d, 'hub.config.json'), JSON.stringify({ listen: { port: 0 }, ledger: { path: './ledger.db' }, servers: { m: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') } }));
    // Write a few rows with the real hub (stdio form), then let it exit at EOF.
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio'], { cwd: d, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    for (let i = 0; i < 3; i++) {
      const r = await c.request({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'm__echo', arguments: { text: `r${i}` }, _meta: META } });
      expect(r.result.content[0].text).toBe(`echo:r${i}`);
    }
    c.endInput();
    expect(await c.exited).toBe(0);

    // A copy of the folder (config, state key and ledger) to tamper with: doctor checks both.
    const t = mkdtempSync(join(tmpdir(), 'switchyard-doctor-tampered-'));
    cpSync(d, t, { recursive: true });
    const db = new Database(join(t, 'ledger.db'));
    const row = db.prepare(`SELECT id FROM audit WHERE hub_name = 'm__echo' ORDER BY id LIMIT 1 OFFSET 1`).get() as { id: number };
    db.prepare(`UPDATE audit SET outcome = 'tool_error' WHERE id = ?`).run(row.id);
    db.close();

    // Both in one process (runCliBatch); the tests below run doctor in processes of its own.
    const [h, tampered] = await runCliBatch([d, t].map((cwd) => ({ args: ['doctor', '--json'], cwd, env: { SWITCHYARD_LOG_LEVEL: 'silent' } })));
    const healthy = { code: h!.code, findings: JSON.parse(h!.stdout) as Record<string, string>[] };
    const ok = healthy.findings.find((f) => f.check === 'ledger')!;
    expect(ok.level).toBe('ok');
    expect(ok.message).toMatch(/hash chain verified \(\d+ rows\)/);

    const broken = { code: tampered!.code, findings: JSON.parse(tampered!.stdout) as Record<string, string>[] };
    expect(broken.code).toBe(1);
    const bad = broken.findings.find((f) => f.check === 'ledger')!;
    expect(bad.level).toBe('fail');
    expect(bad.message).toMatch(new RegExp(`chain broken at row ${row.id}`));
  });

  describe('a ledger start would refuse', () => {
    const undo: (() => unknown)[] = [];
    afterEach(async () => {
      for (const f of undo.splice(0).reverse()) await f();
    });
    /** Root writes through any mode: without these capabilities, modes bind it as they bind a user. */
    const wrap = process.getuid?.() === 0 ? ['setpriv', '--bounding-set', '-dac_override,-dac_read_search'] : [];

    function config(ledgerPath: string, listen: Record<string, unknown> = { port: 0 }): string {
      const d = mkdtempSync(join(tmpdir(), 'switchyard-doctor-start-'));
      const file = join(d, 'hub.config.json');
      writeFileSync(file, JSON.stringify({ listen, ledger: { path: ledgerPath }, servers: {} }));
      return file;
    }

    /** doctor's ledger finding and exit code, and what start says of the same config. */
    async function doctorAndStart(file: string, opts: { wrap?: string[]; url?: string } = {}) {
      const doc = await runCli(['doctor', '--json', '-c', file, ...(opts.url ? ['--url', opts.url] : [])], { wrap: opts.wrap });
      const ledger = (JSON.parse(doc.stdout) as Record<string, string>[]).find((f) => f.check === 'ledger')!;
      return { code: doc.code, ledger };
    }

    /** doctorAndStart's findings for several configs in one process (runCliBatch), then `start -c last`'s. */
    async function doctorsThenStart(files: string[], last: string, opts: { wrap?: string[]; url?: string } = {}) {
      const url = opts.url ? ['--url', opts.url] : [];
      const runs = await runCliBatch([...files.map((file) => ({ args: ['doctor', '--json', '-c', file, ...url] })), { args: ['start', '-c', last] }], { wrap: opts.wrap });
      const start = runs.pop()!;
      const doctors = runs.map((doc) => ({ code: doc.code, ledger: (JSON.parse(doc.stdout) as Record<string, string>[]).find((f) => f.check === 'ledger')! }));
      return { doctors, start };
    }

    /**
     * `start` refuses the config (exits at once, 2, its reason on stderr in doctor's words, not an
     * errno or SQLite's "disk I/O error"): the case is real, not made up here.
     */
    async function startRefuses(file: string, wrap: string[] = []) {
      const r = await runCli(['start', '-c', file], { wrap });
      expect(r.code).toBe(2);
      return r.stderr;
    }

    /** A folder the CLI (wrapped as it runs) cannot write, or undefined when this machine cannot make one. */
    function readOnlyFolder(): string | undefined {
      const d = mkdtempSync(join(tmpdir(), 'switchyard-doctor-ro-'));
      chmodSync(d, 0o555);
      undo.push(() => chmodSync(d, 0o755));
      const [file, ...args] = [...wrap, process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(join(d, 'probe'))}, '')`];
      const probe = spawnSync(file!, args);
      return probe.error === undefined && probe.status !== 0 ? d : undefined;
    }

    it('the ledger folder cannot be made: a file is in its place', async () => {
      const d = mkdtempSync(join(tmpdir(), 'switchyard-doctor-file-'));
      writeFileSync(join(d, 'afile'), '');
      const file = config(join(d, 'afile', 'ledger.db'));
      expect(await startRefuses(file)).toMatch(/^switchyard start: ledger\.path \S+: \S+afile is not a folder: the ledger cannot be created in it/);
      const { code, ledger } = await doctorAndStart(file);
      expect(code).toBe(1);
      expect(ledger).toMatchObject({ level: 'fail', message: expect.stringMatching(/afile is not a folder.*start` would refuse it/) });
    });

    it('the ledger folder cannot be made where access(2) allows it (/proc takes no folder): start and stdio refuse it naming the folder, at once', async () => {
      const file = config('/proc/switchyard-none/ledger.db');
      // Node's recursive mkdir asked again for as long as it heard ENOENT: start hung at full CPU.
      const runs = await runCliBatch([{ args: ['start', '-c', file] }, { args: ['stdio', '-c', file] }]);
      for (const [cmd, r] of [['start', runs[0]!], ['stdio', runs[1]!]] as const)
        // (A user other than root is refused /proc by access(2) already, in doctor's words.)
        expect([r.code, r.stderr], cmd).toEqual([
          2,
          expect.stringMatching(
            new RegExp(`^switchyard ${cmd}: ledger\\.path /proc/switchyard-none/ledger\\.db: (cannot create its folder /proc/switchyard-none \\(ENOENT\\)|cannot create the ledger's folder /proc/switchyard-none: /proc is not writable for this user)\n$`),
          ),
        ]);
    });

    // SQLite's word for the file was printed as the config file's problem, exit 2.
    it('a ledger file that is no database: start and stdio name the ledger and exit 1, not blaming the config', async () => {
      const d = mkdtempSync(join(tmpdir(), 'switchyard-doctor-notadb-'));
      writeFileSync(join(d, 'ledger.db'), Buffer.alloc(8192, 0x5a));
      const file = config(join(d, 'ledger.db'));
      for (const cmd of ['start', 'stdio']) {
        const r = await runCli([cmd, '-c', file]);
        expect([r.code, r.stderr], cmd).toEqual([1, `switchyard ${cmd}: the ledger ${join(d, 'ledger.db')} could not be opened: file is not a database (SQLITE_NOTADB)\n`]);
      }
    });

    it('the ledger folder is not writable for its user, or the file is read-only', async (ctx) => {
      const ro = readOnlyFolder();
      if (!ro) return ctx.skip('cannot make a folder this user cannot write (no setpriv, or the modes do not bind)');
      const file = config(join(ro, 'ledger.db'));
      expect(await startRefuses(file, wrap)).toMatch(/^switchyard start: ledger\.path \S+: the ledger's folder .* is not writable for this user/);

      // A ledger file there, written by a hub before: read-only for this user. Its folder is writable.
      const d = mkdtempSync(join(tmpdir(), 'switchyard-doctor-rofile-'));
      const seed = new Database(join(d, 'ledger.db'));
      seed.close();
      chmodSync(join(d, 'ledger.db'), 0o444);
      const roFile = config(join(d, 'ledger.db'));
      // The rest in one process (runCliBatch), the start last.
      const { doctors, start } = await doctorsThenStart([file, roFile], roFile, { wrap });
      const [folder, fileRo] = doctors as [Awaited<ReturnType<typeof doctorAndStart>>, Awaited<ReturnType<typeof doctorAndStart>>];
      expect(folder.code).toBe(1);
      expect(folder.ledger).toMatchObject({ level: 'fail', message: expect.stringMatching(/folder .* is not writable for this user/) });
      expect(start.code).toBe(2);
      expect(start.stderr).toMatch(/^switchyard start: ledger\.path \S+: the ledger \S+ledger\.db is not writable for this user/);
      expect(fileRo.code).toBe(1);
      expect(fileRo.ledger).toMatchObject({ level: 'fail', message: expect.stringMatching(/ledger\.db is not writable for this user/) });
    });

    it('another running hub writes the ledger; the daemon doctor talks to may', async () => {
      const hub: HubProcess = await startHub({ servers: {} });
      undo.push(() => hub.stop());
      // Another config, another port (0: no daemon to find), the same ledger file.
      const other = config(join(hub.dir, 'ledger.db'));
      expect(await startRefuses(other)).toMatch(/in use by another switchyard process/);
      // Both doctors in one process (runCliBatch).
      const [b, o] = await runCliBatch([{ args: ['doctor', '--json', '-c', other] }, { args: ['doctor', '--json', '-c', hub.configFile, '--url', hub.url] }]);
      const [busy, own] = [b!, o!].map((doc) => ({ code: doc.code, ledger: (JSON.parse(doc.stdout) as Record<string, string>[]).find((f) => f.check === 'ledger')! }));
      expect(busy!.code).toBe(1);
      expect(busy!.ledger).toMatchObject({ level: 'fail', message: expect.stringContaining(`in use by another switchyard process (pid ${hub.proc.pid}`) });
      // The hub's own config, checked alongside it: its daemon holding the lock is as it should be.
      expect(own!.ledger).toMatchObject({ level: 'ok' });
    }, 60_000); // a hub, a start and two doctors: at a load of 13 per CPU it ran past 30 s
  });
});
