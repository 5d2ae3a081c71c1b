// The conformance pipeline's own parts: the Node 20 shim lets both official conformance CLIs
// start, and run.mjs's baseline comparison flags a server without the surface (the known false
// passes included). The fixture against its recorded direct baselines is not run here: the
// CI check (integration/conformance.test.ts) runs every line through the hub against the same
// baselines, so a fixture that regressed fails there; `run.mjs --line L --fixture --expect
// baseline-direct-L.json` then tells the fixture from the hub (docs/CONFORMANCE.md). Running
// the three lines directly as well cost about a minute of a CI worker.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs, { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { conformanceCli, PACKAGES, SHIM } from '../conformance/cli.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');
const RUN = path.join(ROOT, 'test/conformance/run.mjs');

function runScript(args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [RUN, ...args], { cwd: ROOT, timeout: 120_000 }, (error, stdout) => {
      const code = error && typeof (error as { code?: unknown }).code === 'number' ? (error as { code: number }).code : error ? 1 : 0;
      resolve({ code, stdout });
    });
  });
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGTERM');
});

describe('conformance runner', () => {
  it('the shim lets both conformance lines start on this Node: the prepared copy, and the hook it falls back to', async () => {
    const help = (args: string[]) =>
      new Promise<string>((resolve, reject) => execFile(process.execPath, [...args, '--help'], { cwd: ROOT }, (e, stdout) => (e ? reject(e) : resolve(stdout))));
    const lines = ['0.1', '0.2'] as const;
    const started = lines.map((line) => conformanceCli(line));
    // On this Node (no fs.globSync) every runner starts the copy; a bundle it cannot patch any
    // more (a new version) fails here rather than making every run slower unnoticed.
    if (typeof (fs as { globSync?: unknown }).globSync !== 'function') expect(started.map((s) => s.how)).toEqual(['copy', 'copy']);
    const outs = await Promise.all([...started.map((s) => help(s.args)), help(['--import', SHIM, path.join(ROOT, PACKAGES['0.1'], 'dist/index.js')])]);
    for (const out of outs) expect(out).toContain('server [options]');
  });

  it("the client driver's hub does not outlive the driver when its deadline ends it", async () => {
    // An upstream that takes requests and never answers: the hub's probe hangs, so the driver
    // is still waiting for it to be ready when its deadline comes.
    const silent = http.createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-driver-'));
    // The driver makes its hub's folder under TMPDIR: the hub is the process naming this folder.
    // (No hub log: a hub at debug level dies of its closed stderr at its next line anyway.)
    const hubPids = (): number[] =>
      readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .filter((d) => {
          try {
            return readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(dir) && readFileSync(`/proc/${d}/cmdline`, 'utf8').includes('start');
          } catch {
            return false;
          }
        })
        .map(Number);
    try {
      const code = await new Promise<number | null>((resolve) => {
        const driver = spawn(process.execPath, ['test/conformance/client-driver.mjs', `http://127.0.0.1:${(silent.address() as AddressInfo).port}/mcp`], {
          cwd: ROOT,
          env: { ...process.env, TMPDIR: dir, MCP_CONFORMANCE_SCENARIO: 'initialize', CONFCLIENT_DEADLINE_MS: '4000' },
          stdio: 'ignore',
        });
        children.push(driver);
        driver.once('exit', resolve);
      });
      expect(code).toBe(2);
      let left = hubPids();
      for (let i = 0; i < 30 && left.length; i++) {
        await new Promise((r) => setTimeout(r, 100));
        left = hubPids();
      }
      for (const pid of left) process.kill(pid, 'SIGKILL');
      expect(left).toEqual([]);
    } finally {
      silent.closeAllConnections();
      silent.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it('flags a server without the surface, including the known false passes', async () => {
    const child = spawn(process.execPath, [path.join(ROOT, 'test/fixtures/servers/sdk1-server.mjs'), '--http', '0'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    children.push(child);
    const port = await new Promise<number>((resolve, reject) => {
      let buf = '';
      child.stdout?.on('data', (c: Buffer) => {
        buf += c.toString();
        const m = /LISTENING (\d+)/.exec(buf);
        if (m) resolve(Number(m[1]));
      });
      child.once('exit', () => reject(new Error('sdk1-server exited')));
    });
    const { code, stdout } = await runScript([
      '--line', '0.1',
      '--url', `http://127.0.0.1:${port}/mcp`,
      '--scenario', 'tools-call-simple-text',
      '--scenario', 'tools-call-error',
      '--expect', 'test/conformance/baseline-direct-0.1.json',
    ]);
    expect(code).toBe(1);
    expect(stdout).toContain('tools-call-simple-text:false-pass-guard');
    expect(stdout).toContain('tools-call-error:false-pass-guard');
  }, 60_000);
});
