// The hub set-up the conformance lines run through: the built `switchyard start` with ONE
// upstream, the conformance fixture over stdio, unprefixed (the scenarios call hard-coded names).
// Shared by run.mjs (--hub) and test/integration/conformance.test.ts.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const FIXTURE = path.join(ROOT, 'test/fixtures/conformance/server.mjs');
export const HUB_EXPECTATIONS = path.join(ROOT, 'test/conformance/hub-expectations.json');

/** hub.config.json for the conformance upstream; `era` is the upstream's (auto = probe it). */
export function conformanceHubConfig(era = 'auto') {
  return {
    servers: {
      conformance: { command: process.execPath, args: [FIXTURE], prefix: '', era },
    },
  };
}

/**
 * Start the built hub (dist/) with conformanceHubConfig(era) on a free loopback port. Resolves
 * with its MCP URL once it listens; its stderr goes to `logFile`.
 */
export async function startConformanceHub({ era = 'auto', logFile, env = {} } = {}) {
  const bin = path.join(ROOT, 'dist/src/cli/main.js');
  if (!fs.existsSync(bin)) throw new Error('dist/ is missing: build the hub first (npx tsc -p .)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-conformance-'));
  const configFile = path.join(dir, 'hub.config.json');
  fs.writeFileSync(configFile, JSON.stringify({ ledger: { path: path.join(dir, 'ledger.db') }, ...conformanceHubConfig(era) }, null, 2));
  const child = spawn(process.execPath, [bin, 'start', '--config', configFile, '--port', '0'], {
    cwd: ROOT,
    env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'debug', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const log = logFile ? fs.createWriteStream(logFile, { flags: 'a' }) : undefined;
  const url = await new Promise((resolve, reject) => {
    let buf = '';
    let found = false;
    const timer = setTimeout(() => reject(new Error('hub did not listen within 15 s')), 15_000);
    child.stderr.on('data', (chunk) => {
      log?.write(chunk);
      if (found) return;
      buf += chunk;
      const line = buf.split('\n').slice(0, -1).find((l) => l.includes('switchyard listening'));
      if (!line) return;
      found = true;
      clearTimeout(timer);
      try {
        resolve(JSON.parse(line).url);
      } catch {
        reject(new Error(`unreadable listening line: ${line}`));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`hub exited early (${code})`));
    });
  });
  return {
    url,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => {
          log?.end();
          fs.rmSync(dir, { recursive: true, force: true });
          resolve(code);
        });
        child.kill('SIGTERM');
      }),
  };
}
