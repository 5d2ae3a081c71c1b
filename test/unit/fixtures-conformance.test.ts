// The conformance pipeline end to end: the Node 20 shim, the official conformance CLIs
// (both lines), the dual-era fixture server and run.mjs's baseline comparison. If the
// fixture regresses against its recorded direct baseline, the hub-level comparison the
// baselines exist for would be meaningless, so this must stay green.
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

  // At once: each line is a process of its own that mostly waits on the fixture.
  it.concurrent.for([
    ['0.1', 'test/conformance/baseline-direct-0.1.json'],
    ['0.2', 'test/conformance/baseline-direct-0.2.json'],
    ['0.2-active', 'test/conformance/baseline-direct-0.2-active.json'],
  ])('line %s: the fixture server still passes its direct baseline', async ([line, baseline], { expect }) => {
    const { code, stdout } = await runScript(['--line', line, '--fixture', '--expect', baseline]);
    expect(stdout).toMatch(/all \d+ expected scenarios pass/);
    expect(code).toBe(0);
  }, 120_000);

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
