// Peer hubs from npm, installed on first use into bench/.peers (its own package.json, never a
// dependency of Switchyard). Each install attempt and its outcome is kept in attempts.json so a
// peer that cannot be installed is reported, not retried on every run.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PEERS } from './targets.mjs';

/** Pinned so that reruns measure the same code. */
export const PEER_VERSIONS = { 'mcp-proxy': '6.7.19', supergateway: '4.0.0', 'mcp-hub': '4.2.1' };
/** Tried once; recorded with the reason when it cannot be installed. */
export const OPTIONAL_PEERS = ['@1mcp/agent'];

const npm = (args, timeout) =>
  execFileSync('npm', [...args, '--prefix', PEERS, '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout,
    encoding: 'utf8',
  });

function firstErrorLine(err) {
  const text = `${err?.stderr ?? ''}\n${err?.message ?? err}`;
  if (/\bE404\b/.test(text)) return 'npm E404: the package is not in the registry this machine reaches';
  return (
    text
      .split('\n')
      .map((l) => l.replace(/^npm (error|ERR!) /, '').trim())
      .find((l) => /E404|not found|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|ERESOLVE|error/i.test(l)) ?? text.trim().split('\n')[0]
  );
}

/** Installs what is missing; returns { installed: {name: version}, failed: {name: reason} }. */
export function ensurePeers(log = (m) => process.stderr.write(`${m}\n`)) {
  mkdirSync(PEERS, { recursive: true });
  const attemptsFile = join(PEERS, 'attempts.json');
  const attempts = existsSync(attemptsFile) ? JSON.parse(readFileSync(attemptsFile, 'utf8')) : {};
  const installed = {};
  const failed = {};
  const have = (name) => existsSync(join(PEERS, 'node_modules', name, 'package.json'));
  const versionOf = (name) => JSON.parse(readFileSync(join(PEERS, 'node_modules', name, 'package.json'), 'utf8')).version;

  const missing = Object.entries(PEER_VERSIONS).filter(([n, v]) => !have(n) || versionOf(n) !== v);
  if (missing.length) {
    writeFileSync(
      join(PEERS, 'package.json'),
      JSON.stringify({ name: 'switchyard-bench-peers', private: true, version: '0.0.0', dependencies: PEER_VERSIONS }, null, 2) + '\n',
    );
    log(`bench: installing peers into bench/.peers: ${missing.map(([n, v]) => `${n}@${v}`).join(', ')}`);
    try {
      npm(['install'], 300_000);
    } catch (err) {
      log(`bench: peer install failed: ${firstErrorLine(err)}`);
    }
  }
  for (const n of Object.keys(PEER_VERSIONS)) {
    if (have(n)) installed[n] = versionOf(n);
    else failed[n] = 'npm install failed';
  }
  for (const n of OPTIONAL_PEERS) {
    if (have(n)) {
      installed[n] = versionOf(n);
      continue;
    }
    if (!attempts[n]) {
      log(`bench: trying to install ${n}`);
      try {
        npm(['install', '--no-save', n], 180_000);
        attempts[n] = { ok: true, at: new Date().toISOString() };
      } catch (err) {
        attempts[n] = { ok: false, at: new Date().toISOString(), reason: firstErrorLine(err) };
      }
      writeFileSync(attemptsFile, JSON.stringify(attempts, null, 2) + '\n');
    }
    if (have(n)) installed[n] = versionOf(n);
    else failed[n] = `not installable: ${attempts[n]?.reason ?? 'unknown'} (tried ${attempts[n]?.at ?? 'never'})`;
  }
  return { installed, failed };
}
