#!/usr/bin/env node
// Runs the official conformance suite's CLIENT scenarios with the hub as the client under test
// (test/conformance/client-driver.mjs starts a hub per scenario with the suite's mock server as
// its only upstream, and drives it as a downstream client), in parallel, and compares the checks
// with a baseline.
//
//   node test/conformance/run-client.mjs --expect test/conformance/baseline-client.json
//   node test/conformance/run-client.mjs --run "0.2 tools_call@2026-07-28" --keep /tmp/x
//   node test/conformance/run-client.mjs --write-baseline test/conformance/baseline-client.json
//
// Options:
//   --run KEY               run one entry of RUNS (repeatable); default: all of them
//   --ci                    run CI_RUNS (what test/integration/conformance-client.test.ts runs)
//   --expect FILE           exit 1 on any difference from FILE: a check recorded SUCCESS that is
//                           not SUCCESS now (counted: a check id may appear several times), a
//                           FAILURE or WARNING not recorded, or a recorded FAILURE/WARNING that is
//                           gone ("… can go": the baseline stays exact)
//   --write-baseline FILE   record what the runs give now
//   --concurrency N         scenario runs at once (default 6)
//   --timeout MS            per scenario; the client must be done by then (default 45000)
//   --keep DIR              keep each run's checks.json, the CLI output and the hub log in DIR
// Build the hub first (npx tsc -p .).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { conformanceCli } from './cli.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// Relative, without spaces: the suite splits --command on spaces.
const DRIVER = 'test/conformance/client-driver.mjs';

/**
 * "LINE SCENARIO@VERSION[~DOWNSTREAM]": VERSION is the spec version the mock runs at;
 * DOWNSTREAM overrides the driver's own era, which otherwise follows VERSION (the hub translates
 * between the eras, so either must satisfy the mock). RUNS is every non-auth client scenario of
 * both lines, at each revision it is listed for, plus two with the driver in the other era, and
 * the client-credentials scenarios (the hub's own OAuth client toward its upstream, SEP-1046),
 * and the authorization-code ones (AUTH_CODE_RUNS).
 * CI_RUNS (the vitest check) is each scenario once, at the revision that scores the most, and
 * the era-translated MRTR run: the 0.1.16 mocks are the 0.2 line's legacy four again; and each
 * client-credentials scenario once, one per era; and one authorization-code scenario (the PRM
 * found only through the challenge, an issuer with a path, dynamic registration, iss).
 */
export const CI_RUNS = [
  '0.2 initialize@2025-11-25',
  '0.2 tools_call@2026-07-28',
  '0.2 elicitation-sep1034-client-defaults@2025-11-25',
  '0.2 sse-retry@2025-11-25',
  '0.2 request-metadata@2026-07-28',
  '0.2 sep-2322-client-request-state@2026-07-28',
  '0.2 sep-2322-client-request-state@2026-07-28~legacy',
  '0.2 http-standard-headers@2026-07-28',
  '0.2 http-custom-headers@2026-07-28',
  '0.2 http-invalid-tool-headers@2026-07-28',
  '0.2 json-schema-ref-no-deref@2026-07-28',
  '0.2 json-schema-2020-12-preservation@2026-07-28',
  '0.2 auth/client-credentials-basic@2026-07-28',
  '0.2 auth/client-credentials-jwt@2025-11-25',
  '0.2 auth/metadata-var3@2026-07-28',
];

/**
 * The authorization-code scenarios (`switchyard login`, then the hub with the stored tokens; see
 * client-driver.mjs): every one of the 0.2 line at 2026-07-28 (the 2025-03-26 ones are of a
 * revision the hub does not speak), and a few at 2025-11-25 and on the 0.1 line.
 */
const AUTH_CODE_RUNS = [
  ...[
    'metadata-default',
    'metadata-var1',
    'metadata-var2',
    'basic-cimd',
    'scope-from-www-authenticate',
    'scope-from-scopes-supported',
    'scope-omitted-when-undefined',
    'scope-step-up',
    'scope-retry-limit',
    'token-endpoint-auth-basic',
    'token-endpoint-auth-post',
    'token-endpoint-auth-none',
    'pre-registration',
    'resource-mismatch',
    'offline-access-scope',
    'offline-access-not-supported',
    'authorization-server-migration',
    'iss-supported',
    'iss-not-advertised',
    'iss-supported-missing',
    'iss-wrong-issuer',
    'iss-unexpected',
    'iss-normalized',
    'metadata-issuer-mismatch',
  ].map((s) => `0.2 auth/${s}@2026-07-28`),
  '0.2 auth/metadata-default@2025-11-25',
  '0.2 auth/token-endpoint-auth-basic@2025-11-25',
  '0.2 auth/scope-from-www-authenticate@2025-11-25',
  '0.2 auth/pre-registration@2025-11-25',
  '0.1 auth/metadata-default@2025-11-25',
  '0.1 auth/basic-cimd@2025-11-25',
  '0.1 auth/token-endpoint-auth-post@2025-11-25',
  '0.1 auth/scope-from-scopes-supported@2025-11-25',
];

export const RUNS = [
  '0.1 initialize@2025-11-25',
  '0.1 tools_call@2025-11-25',
  '0.1 elicitation-sep1034-client-defaults@2025-11-25',
  '0.1 sse-retry@2025-11-25',
  ...CI_RUNS,
  '0.2 tools_call@2025-11-25',
  '0.2 elicitation-sep1034-client-defaults@2025-11-25~modern',
  '0.2 json-schema-2020-12-preservation@2025-11-25',
  '0.1 auth/client-credentials-basic@2025-11-25',
  '0.1 auth/client-credentials-jwt@2025-11-25',
  '0.2 auth/client-credentials-basic@2025-11-25',
  '0.2 auth/client-credentials-jwt@2026-07-28',
  ...AUTH_CODE_RUNS,
];

/** Scenarios of extensions (no spec revision introduces them); see runOne. */
const EXTENSION_SCENARIOS = new Set(['auth/client-credentials-basic', 'auth/client-credentials-jwt']);

export function parseRun(key) {
  const m = /^(0\.1|0\.2) ([\w/-]+)@([\d-]+)(?:~(legacy|modern))?$/.exec(key);
  if (!m) throw new Error(`not a run: ${key}`);
  return { key, line: m[1], scenario: m[2], version: m[3], downstream: m[4] };
}

/**
 * One scenario through the CLI; resolves with its checks (an empty list when it wrote none) and output.
 * @param {{ key: string; line: string; scenario: string; version: string; downstream?: string }} run
 * @param {{ timeoutMs: number; keepDir?: string }} options keepDir: where to keep the run's files (else a temporary directory, removed)
 */
export function runOne(run, { timeoutMs, keepDir }) {
  const dir = keepDir ? path.join(keepDir, run.key.replace(/[^\w.@~-]+/g, '_')) : fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-confclient-run-'));
  fs.mkdirSync(dir, { recursive: true });
  const args = [...conformanceCli(run.line).args, 'client', '--command', `node ${DRIVER}`, '--scenario', run.scenario];
  args.push('--timeout', String(timeoutMs), '-o', path.join(dir, 'out'));
  // 0.1.16 has no --spec-version for these; the 0.2 line runs each scenario at the one asked for.
  if (run.line === '0.2') args.push('--spec-version', run.version);
  // Extension scenarios (SEP-1046 client credentials) sit on no spec revision's timeline: the
  // 0.2 line skips them at any --spec-version unless forced, and then runs them at that version.
  if (run.line === '0.2' && EXTENSION_SCENARIOS.has(run.scenario)) args.push('--force');
  const env = { ...process.env, CONFCLIENT_DEADLINE_MS: String(timeoutMs - 2_000) };
  if (run.downstream) env.CONFCLIENT_DOWNSTREAM = run.downstream;
  if (keepDir) env.CONFCLIENT_HUB_LOG = path.join(dir, 'hub.log');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    // The suite stops the client at timeoutMs; this only guards against the suite itself hanging.
    const guard = setTimeout(() => child.kill('SIGKILL'), timeoutMs + 30_000);
    child.on('close', () => {
      clearTimeout(guard);
      if (keepDir) fs.writeFileSync(path.join(dir, 'cli.log'), output);
      const file = findChecks(path.join(dir, 'out'));
      const checks = file ? JSON.parse(fs.readFileSync(file, 'utf8')) : [];
      if (!keepDir) fs.rmSync(dir, { recursive: true, force: true });
      resolve({ checks, output });
    });
  });
}

function findChecks(dir) {
  if (!fs.existsSync(dir)) return undefined;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      const f = findChecks(p);
      if (f) return f;
    } else if (e.name === 'checks.json') return p;
  }
  return undefined;
}

/** The scored part of a run: "id|name" per check, by status (INFO left out), sorted. */
export function summarise(checks) {
  const by = {};
  for (const c of checks) {
    if (c.status === 'INFO') continue;
    (by[c.status] ??= []).push(`${c.id}|${c.name}`);
  }
  for (const k of Object.keys(by)) by[k].sort();
  return by;
}

function counts(list = []) {
  const m = new Map();
  for (const k of list) m.set(k, (m.get(k) ?? 0) + 1);
  return m;
}

/** Differences of one run from its baseline entry, as sentences ("… can go" for a stale one). */
export function compare(now, want) {
  if (!want) return ['not in the baseline'];
  const out = [];
  const nowOk = counts(now.SUCCESS);
  for (const [k, n] of counts(want.SUCCESS)) if ((nowOk.get(k) ?? 0) < n) out.push(`${k}: SUCCESS in the baseline, now not (${n - (nowOk.get(k) ?? 0)} of ${n})`);
  for (const status of ['FAILURE', 'WARNING']) {
    const have = counts(now[status]);
    const allowed = counts(want[status]);
    for (const [k, n] of have) if ((allowed.get(k) ?? 0) < n) out.push(`${k}: ${status} (not in the baseline)`);
    for (const [k, n] of allowed) if ((have.get(k) ?? 0) < n) out.push(`${k}: recorded as ${status}, not any more: the baseline entry can go`);
  }
  return out;
}

async function pool(items, n, fn) {
  const results = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await fn(items[i]);
      }
    }),
  );
  return results;
}

async function main() {
  const { values } = parseArgs({
    options: {
      run: { type: 'string', multiple: true },
      ci: { type: 'boolean' },
      expect: { type: 'string' },
      'write-baseline': { type: 'string' },
      concurrency: { type: 'string', default: '6' },
      timeout: { type: 'string', default: '45000' },
      keep: { type: 'string' },
    },
  });
  if (!fs.existsSync(path.join(ROOT, 'dist/src/cli/main.js'))) throw new Error('dist/ is missing: build the hub first (npx tsc -p .)');
  const runs = (values.run ?? (values.ci ? CI_RUNS : RUNS)).map(parseRun);
  const keepDir = values.keep ? path.resolve(values.keep) : undefined;
  const timeoutMs = Number(values.timeout);
  const started = Date.now();
  const results = await pool(runs, Number(values.concurrency), async (run) => {
    const r = await runOne(run, { timeoutMs, keepDir });
    return { run, summary: summarise(r.checks), output: r.output };
  });
  const baseline = values.expect ? JSON.parse(fs.readFileSync(values.expect, 'utf8')) : undefined;
  let bad = 0;
  for (const { run, summary, output } of results) {
    const ok = (summary.SUCCESS ?? []).length;
    const notOk = ['FAILURE', 'WARNING'].map((s) => (summary[s] ?? []).length);
    const diffs = baseline ? compare(summary, baseline.runs[run.key]) : ok === 0 || notOk.some((n) => n > 0) ? ['not all checks pass'] : [];
    console.log(`${diffs.length ? 'DIFF' : 'OK  '} ${run.key}: ${ok} success, ${notOk[0]} failure, ${notOk[1]} warning`);
    for (const d of diffs) console.log(`       ${d}`);
    if (diffs.length) {
      bad++;
      console.log(output.split('\n').filter((l) => !/^\s+at /.test(l)).slice(-40).map((l) => `       | ${l}`).join('\n'));
    }
  }
  console.log(`${runs.length} runs in ${((Date.now() - started) / 1000).toFixed(1)} s; ${bad ? `${bad} differ from the baseline` : baseline ? 'all as in the baseline' : 'all pass'}`);
  if (values['write-baseline']) {
    const file = values['write-baseline'];
    const old = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
    const out = {
      description:
        "The conformance suite's client scenarios with the hub as the client (test/conformance/client-driver.mjs): per run, the scored checks (id|name) by status. run-client.mjs --expect fails on any difference. Every check not SUCCESS is explained in docs/CONFORMANCE.md (The client scenarios).",
      packages: { '0.1': '@modelcontextprotocol/conformance@0.1.16', '0.2': '@modelcontextprotocol/conformance@0.2.0-alpha.12 (conformance-next)' },
      runs: { ...(old.runs ?? {}), ...Object.fromEntries(results.map(({ run, summary }) => [run.key, summary])) },
    };
    fs.writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
    console.log(`wrote ${file}`);
    return 0;
  }
  return bad ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => process.exit(code),
    (err) => {
      console.error(err?.stack ?? err);
      process.exit(2);
    },
  );
}
