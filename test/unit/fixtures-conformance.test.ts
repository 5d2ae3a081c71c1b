// The conformance pipeline's own parts: the Node 20 shim lets both official conformance CLIs
// start, and run.mjs's baseline comparison flags a server without the surface (the known false
// passes included). The fixture against its recorded direct baselines is not run here: the
// CI check (integration/conformance.test.ts) runs every line through the hub against the same
// baselines, so a fixture that regressed fails there; `run.mjs --line L --fixture --expect
// baseline-direct-L.json` then tells the fixture from the hub (docs/CONFORMANCE.md). Running
// the three lines directly as well cost about a minute of a CI worker.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

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
  it('the shim lets both conformance lines start on this Node', async () => {
    for (const cli of ['node_modules/@modelcontextprotocol/conformance/dist/index.js', 'node_modules/conformance-next/dist/index.js']) {
      const out = await new Promise<string>((resolve, reject) =>
        execFile(process.execPath, ['--import', './test/conformance/shim/register.mjs', cli, '--help'], { cwd: ROOT }, (e, stdout) =>
          e ? reject(e) : resolve(stdout),
        ),
      );
      expect(out).toContain('server [options]');
    }
  });

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
