/**
 * The CLI finds a running daemon after `listen.port` was edited in its config: the daemon applies
 * listen only at a restart, so the file names a port where nothing listens, and `servers`,
 * `reload` and `doctor` said no daemon runs (exit 3). The daemon records where it listens in its
 * state folder (`<ledger>.daemon`, beside the ledger); the CLI asks there and says the two differ. The
 * real built binary against the real built daemon.
 */
import { chownSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCliBatch } from '../helpers/cli.js';
import { nodeServer, startHub } from '../helpers/hub-process.js';
import { freePortInRange } from '../helpers/port-range.js';
import { waitForReady } from '../helpers/wire.js';

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
const ENV = { SWITCHYARD_API_KEY: '' };

function setPort(file: string, port: number): void {
  const c = JSON.parse(readFileSync(file, 'utf8')) as { listen: { port: number } };
  c.listen.port = port;
  writeFileSync(file, JSON.stringify(c, null, 2));
}

describe('a daemon whose config names another port since it started', () => {
  it('is found where it recorded it listens, by servers, servers restart, reload and doctor, each saying the file differs; once it stops, no daemon (exit 3)', async () => {
    const port = await freePortInRange();
    const hub = await startHub({ listen: { port }, servers: { a: nodeServer(SDK1, [], { SERVER_NAME: 'a' }) } }, { port, args: ['--no-watch'] });
    const record = join(hub.dir, 'ledger.db.daemon');
    try {
      await waitForReady(hub.url, ['a']);
      expect(JSON.parse(readFileSync(record, 'utf8'))).toMatchObject({ pid: hub.proc.pid, config: hub.configFile, listen: { host: '127.0.0.1', port } });
      let other = await freePortInRange();
      while (other === port) other = await freePortInRange();
      setPort(hub.configFile, other);
      const c = ['-c', hub.configFile];
      const [servers, restart, reload, doctor] = await runCliBatch([
        { args: ['servers', '--json', ...c], env: ENV },
        { args: ['servers', 'restart', 'a', ...c], env: ENV },
        { args: ['reload', ...c], env: ENV },
        { args: ['doctor', '--json', ...c], env: ENV },
      ]);
      const at = `http://127.0.0.1:${port}`;
      const note = (cmd: string) =>
        `switchyard ${cmd}: note: the daemon of ${hub.configFile} (pid ${hub.proc.pid}) listens at ${at}, not at http://127.0.0.1:${other} where the file now says: it applies a change of listen when it restarts (until then give --url ${at}, or restart it)\n`;
      expect([servers!.code, servers!.stderr]).toEqual([0, note('servers')]);
      expect((JSON.parse(servers!.stdout) as { id: string }[]).map((s) => s.id)).toEqual(['a']);
      expect([restart!.code, restart!.stdout, restart!.stderr]).toEqual([0, expect.stringMatching(/^restarted "a": ready/), note('servers restart')]);
      expect([reload!.code, reload!.stderr]).toEqual([0, note('reload')]);
      expect(reload!.stdout).toContain('changed, but only a restart applies them (the running values are kept): listen.port');
      const findings = JSON.parse(doctor!.stdout) as { level: string; check: string; message: string }[];
      expect(findings.filter((f) => f.check === 'daemon')).toEqual([
        { level: 'ok', check: 'daemon', message: expect.stringContaining(`running at ${at} (pid ${hub.proc.pid})`) },
        { level: 'warn', check: 'daemon', message: note('x').replace(/^switchyard x: note: /, '').trimEnd() },
      ]);
    } finally {
      await hub.stop();
    }
    // Its record goes with it: nothing to find, and the command says no daemon runs.
    expect(existsSync(record)).toBe(false);
    const [after] = await runCliBatch([{ args: ['servers', '-c', hub.configFile], env: ENV }]);
    expect([after!.code, after!.stdout]).toEqual([3, '']);
    expect(after!.stderr).toMatch(/^switchyard servers: no switchyard daemon is running at http:\/\/127\.0\.0\.1:\d+ \(start one/);
  }, 60_000);

  it('listen.port 0 (any free port): servers and doctor find the daemon where it recorded it listens, with no note (there was no edit)', async () => {
    const hub = await startHub({ listen: { port: 0 }, servers: { a: nodeServer(SDK1, [], { SERVER_NAME: 'a' }) } });
    try {
      await waitForReady(hub.url, ['a']);
      const [servers, doctor] = await runCliBatch([
        { args: ['servers', '--json', '-c', hub.configFile], env: ENV },
        { args: ['doctor', '--json', '-c', hub.configFile], env: ENV },
      ]);
      expect([servers!.code, servers!.stderr]).toEqual([0, '']);
      expect((JSON.parse(servers!.stdout) as { id: string }[]).map((s) => s.id)).toEqual(['a']);
      const findings = JSON.parse(doctor!.stdout) as { level: string; check: string; message: string }[];
      // It said "listen.port is 0 (any free port): pass --url", and started the upstreams a second time to check them.
      expect(findings.filter((f) => f.check === 'daemon')).toEqual([{ level: 'ok', check: 'daemon', message: expect.stringContaining(`running at http://127.0.0.1:${hub.port} (pid ${hub.proc.pid})`) }]);
    } finally {
      await hub.stop();
    }
  }, 60_000);

  it('started with --port other than the file names: found, and the note says the option, not an edit, made the difference', async () => {
    const named = await freePortInRange();
    const hub = await startHub({ listen: { port: named }, servers: {} }); // start --port 0
    try {
      const [r] = await runCliBatch([{ args: ['servers', '-c', hub.configFile], env: ENV }]);
      expect([r!.code, r!.stderr]).toEqual([
        0,
        `switchyard servers: note: the daemon of ${hub.configFile} (pid ${hub.proc.pid}) listens at http://127.0.0.1:${hub.port}, as start's --host or --port said, not at http://127.0.0.1:${named} where the file says (--url http://127.0.0.1:${hub.port} asks it there directly)\n`,
      ]);
    } finally {
      await hub.stop();
    }
  }, 60_000);

  // ledger.path, like listen, waits for a restart: its record stayed beside the old ledger, and
  // the CLI, reading the file as edited, looked beside the new one and said no daemon ran (exit 3).
  it('whose ledger.path was edited too (applied at its restart) is still found: a reload writes its record beside the new ledger as well, both removed when it stops; its ledger is the one `ledger query` reads meanwhile', async () => {
    const hub = await startHub({ listen: { port: 0 }, servers: {} }, { args: ['--no-watch'] });
    const moved = join(hub.dir, 'moved', 'ledger.db');
    try {
      const c = JSON.parse(readFileSync(hub.configFile, 'utf8')) as { ledger: { path: string } };
      c.ledger.path = moved;
      writeFileSync(hub.configFile, JSON.stringify(c, null, 2));
      const seen = hub.logs.length;
      hub.proc.kill('SIGHUP');
      await expect.poll(() => hub.logs.slice(seen).some((l) => l.includes('change only on a restart')), { timeout: 10_000 }).toBe(true);
      const [r, query, prune] = await runCliBatch([
        { args: ['servers', '--json', '-c', hub.configFile], env: ENV },
        { args: ['ledger', 'query', '--json', '-c', hub.configFile], env: ENV },
        { args: ['ledger', 'prune', '--before', '30d', '-c', hub.configFile], env: ENV },
      ]);
      expect([r!.code, r!.stderr]).toEqual([0, '']);
      expect(JSON.parse(r!.stdout)).toEqual([]);
      // The ledger commands read the ledger the daemon writes (it said "no ledger database at
      // …/moved/ledger.db", exit 1, while the daemon wrote the old one), saying so; a prune is not
      // sent there unasked.
      const old = join(hub.dir, 'ledger.db');
      expect([query!.code, query!.stderr]).toEqual([0, `switchyard ledger query: note: ledger.path names ${moved}, which its running daemon (pid ${hub.proc.pid}) applies at its next restart: it writes ${old}, which is read\n`]);
      expect([prune!.code, prune!.stderr]).toEqual([1, expect.stringContaining(`it writes ${old}; give that one with --db`)]);
    } finally {
      await hub.stop();
    }
    expect([existsSync(join(hub.dir, 'ledger.db.daemon')), existsSync(`${moved}.daemon`)]).toEqual([false, false]);
    // Stopped, the edited path is the config's ledger, not made yet: said as before.
    const [after] = await runCliBatch([{ args: ['ledger', 'query', '-c', hub.configFile], env: ENV }]);
    expect([after!.code, after!.stderr]).toEqual([1, expect.stringContaining(`no ledger database at ${moved} (ledger.path)`)]);
  }, 60_000);

  it("two daemons whose ledgers share a folder keep a record each: the one stopping first leaves the other's", async () => {
    const [p1, p2, q1] = [await freePortInRange(), await freePortInRange(), await freePortInRange()];
    const first = await startHub({ listen: { port: p1 }, servers: {} }, { port: p1 });
    // Its config elsewhere, its ledger beside the first one's (one project's data/ folder).
    const second = await startHub({ listen: { port: p2 }, ledger: { path: join(first.dir, 'second.db') }, servers: {} }, { port: p2 });
    try {
      setPort(first.configFile, q1);
      await second.stop();
      const [r] = await runCliBatch([{ args: ['servers', '-c', first.configFile], env: ENV }]);
      expect([r!.code, r!.stderr]).toEqual([0, expect.stringContaining(`the daemon of ${first.configFile} (pid ${first.proc.pid}) listens at http://127.0.0.1:${p1}`)]);
    } finally {
      await Promise.all([first.stop(), second.stop()]);
    }
  }, 60_000);

  it('a record a killed daemon left, one of another config, or one another user wrote is not followed', async () => {
    const port = await freePortInRange();
    const hub = await startHub({ listen: { port }, servers: {} }, { port });
    const record = join(hub.dir, 'ledger.db.daemon');
    let other = await freePortInRange();
    while (other === port) other = await freePortInRange();
    setPort(hub.configFile, other);
    const ask = async () => (await runCliBatch([{ args: ['servers', '-c', hub.configFile], env: ENV }]))[0]!;
    try {
      const written = readFileSync(record, 'utf8');
      // Of another config file (two configs on one state folder): not this config's daemon.
      writeFileSync(record, JSON.stringify({ ...JSON.parse(written), config: join(hub.dir, 'other.json') }));
      expect((await ask()).code).toBe(3);
      // Written by another user, where the folder lets them: it would send the admin key where it says.
      if (process.getuid?.() === 0) {
        writeFileSync(record, written);
        chownSync(record, 65534, 65534);
        expect((await ask()).code).toBe(3);
        chownSync(record, 0, 0);
      }
      writeFileSync(record, written);
      expect((await ask()).code).toBe(0);
    } finally {
      await hub.stop('SIGKILL');
    }
    // Killed: the record stays, naming a process that is gone.
    expect(existsSync(record)).toBe(true);
    const gone = await ask();
    expect([gone.code, gone.stdout]).toEqual([3, '']);
    expect(gone.stderr).toMatch(/^switchyard servers: no switchyard daemon is running at /);
  }, 60_000);
});
