#!/usr/bin/env node
// Runs one line of the official MCP conformance server suite against a URL, summarises
// the result per scenario, and optionally compares it with (or writes) a baseline.
//
//   node test/conformance/run.mjs --line 0.1 --url http://127.0.0.1:PORT/mcp --expect test/conformance/baseline-direct-0.1.json
//   node test/conformance/run.mjs --line 0.2 --fixture --write-baseline test/conformance/baseline-direct-0.2.json
//   node test/conformance/run.mjs --line 0.1 --hub --expect test/conformance/baseline-direct-0.1.json --hub-expect test/conformance/hub-expectations.json
//
// Options:
//   --line 0.1|0.2|0.2-active
//                           0.1 = @modelcontextprotocol/conformance@0.1.16 (runs --suite all),
//                           0.2 = conformance-next (0.2.0-alpha.12, runs --requirements 2026-07-28),
//                           0.2-active = conformance-next --suite active (legacy scenarios at 2025-11-25)
//   --url URL               endpoint under test (POST /mcp)
//   --fixture               start test/fixtures/conformance/server.mjs --http 0 and test it instead of --url
//   --hub                   start the built hub (dist/) with the fixture as its one stdio upstream
//                           (prefix "") and test the hub instead of --url; see test/conformance/hub.mjs
//   --hub-era ERA           the upstream's era in that hub config: auto (default), 2025-11-25, 2026-07-28
//   --hub-expect FILE       documented differences through the hub (hub-expectations.json): scenarios
//                           that may fail and checks that may end other than SUCCESS (never FAILURE),
//                           each with its reason; applied to --expect for this --line
//   --scenario NAME         run one scenario (repeatable); default: the whole line
//   --only NAME             run the whole line but judge and report only this scenario (repeatable).
//                           One CLI process for the line costs far less than one per scenario
//                           (measured: 41 scenarios ~3 s of CPU, 14 single ones ~30 s), so for
//                           more than a couple of scenarios this is the cheaper --scenario
//   --expect FILE           exit 1 unless every scenario listed as passing in FILE still passes
//                           with at least the same SUCCESS checks (a check that turned into a
//                           WARNING/SKIPPED is a regression too; --lenient only counts FAILUREs)
//   --write-baseline FILE   record the scenarios that pass now
//   --keep DIR              keep the per-scenario checks.json files (and the CLI log) in DIR
//   --timeout MS            whole-run timeout (default 600000)
// Without --expect/--write-baseline the exit code is 1 when any scenario fails.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { conformanceCli } from './cli.mjs';
import { startConformanceHub } from './hub.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// extraArgs select the whole line; scenarioArgs are added when single scenarios are run.
const LINES = {
  '0.1': { cli: '0.1', pkgDir: 'node_modules/@modelcontextprotocol/conformance', extraArgs: ['--suite', 'all'], scenarioArgs: [] },
  '0.2': {
    cli: '0.2',
    pkgDir: 'node_modules/conformance-next',
    extraArgs: ['--requirements', '2026-07-28'],
    scenarioArgs: ['--spec-version', '2026-07-28'],
  },
  // The 0.2 line's active suite, each scenario at its own revision (2025-11-25 for the legacy ones).
  '0.2-active': { cli: '0.2', pkgDir: 'node_modules/conformance-next', extraArgs: ['--suite', 'active'], scenarioArgs: [] },
};

// Scenarios that also pass when the tool is missing (its "not found" isError reply satisfies
// the checks). Guard them by looking at what the tool actually returned.
const FALSE_PASS_GUARDS = {
  'tools-call-simple-text': (checks) =>
    firstText(checks, 'tools-call-simple-text') === 'This is a simple text response for testing.' ? null : 'result text is not the test_simple_text text (tool missing or renamed?)',
  'tools-call-error': (checks) =>
    firstText(checks, 'tools-call-error') === 'This tool intentionally returns an error for testing' ? null : 'error text is not the test_error_handling text (tool missing or renamed?)',
};

function firstText(checks, id) {
  const content = checks.find((c) => c.id === id)?.details?.result?.content;
  return Array.isArray(content) ? content.find((b) => b?.type === 'text')?.text : undefined;
}

function usage(message) {
  process.stderr.write(`${message}\nsee the header of test/conformance/run.mjs for usage\n`);
  process.exit(2);
}

function readArgs() {
  const { values } = parseArgs({
    options: {
      line: { type: 'string' },
      url: { type: 'string' },
      fixture: { type: 'boolean', default: false },
      hub: { type: 'boolean', default: false },
      'hub-era': { type: 'string', default: 'auto' },
      'hub-expect': { type: 'string' },
      scenario: { type: 'string', multiple: true },
      only: { type: 'string', multiple: true },
      expect: { type: 'string' },
      'write-baseline': { type: 'string' },
      keep: { type: 'string' },
      lenient: { type: 'boolean', default: false },
      timeout: { type: 'string', default: '600000' },
    },
  });
  if (!LINES[values.line]) usage(`--line must be one of ${Object.keys(LINES).join(', ')}`);
  if ([values.url !== undefined, values.fixture, values.hub].filter(Boolean).length !== 1) usage('give one of --url URL, --fixture, --hub');
  if (values.scenario && values.only) usage('give --scenario or --only, not both');
  return values;
}

async function startFixture(logFile) {
  const child = spawn(process.execPath, [path.join(ROOT, 'test/fixtures/conformance/server.mjs'), '--http', '0'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', fs.openSync(logFile, 'a')],
  });
  const port = await new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error('fixture did not print LISTENING within 15 s')), 15_000);
    child.stdout.on('data', (chunk) => {
      buf += chunk;
      const m = /LISTENING (\d+)/.exec(buf);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.once('exit', (code) => reject(new Error(`fixture exited early (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}/mcp`, stop: () => child.kill('SIGTERM') };
}

function runCli(line, url, outDir, scenarios, timeoutMs) {
  const cli = conformanceCli(LINES[line].cli).args;
  const runs = scenarios?.length ? scenarios.map((s) => ['--scenario', s]) : [LINES[line].extraArgs];
  const runOne = (selector) => {
    const pin = selector[0] === '--scenario' ? LINES[line].scenarioArgs : [];
    const args = [...cli, 'server', '--url', url, '-o', outDir, ...selector, ...pin];
    return new Promise((resolve) => {
      const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout.on('data', (c) => (text += c));
      child.stderr.on('data', (c) => (text += c));
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.on('close', () => {
        clearTimeout(timer);
        resolve(text);
      });
    });
  };
  // Single scenarios are a CLI process each, mostly spent loading the suite and waiting on the
  // server: a few at once (each writes its own checks folder; the summary lines are read from
  // the joined log in any order) take a third of the time of one after another.
  const jobs = Math.max(1, Number(process.env.CONFORMANCE_JOBS ?? 3));
  const texts = new Array(runs.length);
  let next = 0;
  const worker = async () => {
    while (next < runs.length) {
      const i = next++;
      texts[i] = await runOne(runs[i]);
    }
  };
  return Promise.all(Array.from({ length: Math.min(jobs, runs.length) }, worker)).then(() => texts.join(''));
}

const DIR_RE = /^server-(.+)-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)$/;

/** scenario -> { checks, failures, successIds, scored } from checks.json files plus the CLI summary. */
function collect(outDir, log) {
  const results = new Map();
  for (const dir of fs.readdirSync(outDir)) {
    const m = DIR_RE.exec(dir);
    const file = path.join(outDir, dir, 'checks.json');
    if (!m || !fs.existsSync(file)) continue;
    const checks = JSON.parse(fs.readFileSync(file, 'utf8'));
    results.set(m[1], summarise(checks));
  }
  // Scenarios that crashed before writing checks.json still show up in the summary.
  for (const m of log.matchAll(/^([✓✗]) ([^\s:]+): (\d+) passed, (\d+) failed$/gmu)) {
    if (!results.has(m[2]) && m[1] === '✗') {
      results.set(m[2], { checks: [], failures: [{ id: m[2], message: 'scenario crashed (see CLI log)' }], successIds: [] });
    }
  }
  const unscored = new Set([...log.matchAll(/^ {2}[✓✗] (\S+) \(([^)]*)\)$/gmu)].map((m) => m[1]));
  for (const [name, r] of results) r.scored = !unscored.has(name);
  return results;
}

function summarise(checks) {
  const failures = checks.filter((c) => c.status === 'FAILURE').map((c) => ({ id: c.id, message: c.errorMessage ?? c.description }));
  const successIds = checks.filter((c) => c.status === 'SUCCESS').map((c) => c.id);
  return { checks, failures, successIds };
}

function applyGuards(results) {
  for (const [name, guard] of Object.entries(FALSE_PASS_GUARDS)) {
    const r = results.get(name);
    if (!r || r.failures.length > 0) continue;
    const problem = guard(r.checks);
    if (problem) r.failures.push({ id: `${name}:false-pass-guard`, message: problem });
  }
}

function countIds(ids) {
  const counts = new Map();
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/**
 * Regressions against the baseline, and notes about hub expectations (`hub`: {scenarios: {name:
 * reason}, checks: {scenario: {checkId: reason}}}) that were used or are no longer needed.
 */
function compare(results, baseline, lenient, only, hub = {}) {
  const regressions = [];
  const notes = [];
  for (const [name, expected] of Object.entries(baseline.passing)) {
    if (only && !only.includes(name)) continue;
    const r = results.get(name);
    const excused = hub.scenarios?.[name];
    if (excused) {
      if (r && r.failures.length === 0) notes.push(`${name}: passes now; its hub expectation can go`);
      else notes.push(`${name}: expected to fail through the hub (${excused})`);
      continue;
    }
    if (!r) {
      regressions.push(`${name}: did not run`);
      continue;
    }
    for (const f of r.failures) regressions.push(`${name}: ${f.id}: ${f.message}`);
    if (lenient || r.failures.length > 0) continue;
    const now = countIds(r.successIds);
    for (const [id, n] of countIds(expected.successChecks ?? [])) {
      if ((now.get(id) ?? 0) >= n) continue;
      const why = hub.checks?.[name]?.[id];
      if (why) {
        const status = r.checks.find((c) => c.id === id)?.status ?? 'absent';
        notes.push(`${name}: check ${id} is ${status} through the hub (${why})`);
      } else regressions.push(`${name}: check ${id} no longer SUCCESS (${now.get(id) ?? 0}/${n})`);
    }
  }
  for (const [name, checks] of Object.entries(hub.checks ?? {})) {
    const r = results.get(name);
    if (!r || r.failures.length > 0 || (only && !only.includes(name))) continue;
    for (const id of Object.keys(checks)) {
      const want = countIds(baseline.passing[name]?.successChecks ?? []).get(id) ?? 0;
      if ((countIds(r.successIds).get(id) ?? 0) >= want) notes.push(`${name}: check ${id} is SUCCESS now; its hub expectation can go`);
    }
  }
  return { regressions, notes };
}

function packageVersion(line) {
  return JSON.parse(fs.readFileSync(path.join(ROOT, LINES[line].pkgDir, 'package.json'), 'utf8')).version;
}

function writeBaseline(file, line, results) {
  const passing = {};
  const failing = {};
  for (const [name, r] of [...results].sort(([a], [b]) => a.localeCompare(b))) {
    if (r.failures.length === 0) passing[name] = { scored: r.scored, successChecks: r.successIds };
    else failing[name] = { scored: r.scored, failures: r.failures.map((f) => `${f.id}: ${f.message}`) };
  }
  const baseline = {
    line,
    package: `@modelcontextprotocol/conformance@${packageVersion(line)}`,
    selection: LINES[line].extraArgs.join(' '),
    measuredAgainst: 'test/fixtures/conformance/server.mjs --http (direct, no hub)',
    passing,
    failing,
  };
  fs.writeFileSync(file, `${JSON.stringify(baseline, null, 2)}\n`);
}

async function main() {
  const args = readArgs();
  const outDir = args.keep ? path.resolve(args.keep) : fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-conformance-'));
  fs.mkdirSync(outDir, { recursive: true });
  const fixture = args.fixture
    ? await startFixture(path.join(outDir, 'fixture.log'))
    : args.hub
      ? await startConformanceHub({ era: args['hub-era'], logFile: path.join(outDir, 'hub.log') })
      : undefined;
  const url = fixture?.url ?? args.url;
  let exitCode = 0;
  try {
    const log = await runCli(args.line, url, outDir, args.scenario, Number(args.timeout));
    fs.writeFileSync(path.join(outDir, 'cli.log'), log);
    const results = collect(outDir, log);
    // The scenarios judged: those run one by one, or those picked out of the whole line.
    const picked = args.scenario ?? args.only;
    if (args.only) for (const name of results.keys()) if (!args.only.includes(name)) results.delete(name);
    applyGuards(results);

    const failed = [...results].filter(([, r]) => r.failures.length > 0);
    process.stdout.write(`conformance ${args.line} (${packageVersion(args.line)}) against ${url}\n`);
    for (const [name, r] of [...results].sort(([a], [b]) => a.localeCompare(b))) {
      const tag = r.scored ? '' : ' [not scored]';
      process.stdout.write(`${r.failures.length === 0 ? 'PASS' : 'FAIL'} ${name} (${r.successIds.length} ok)${tag}\n`);
      for (const f of r.failures) process.stdout.write(`     - ${f.id}: ${String(f.message).split('\n')[0].slice(0, 200)}\n`);
    }
    process.stdout.write(`${results.size - failed.length}/${results.size} scenarios pass\n`);
    if (results.size === 0) {
      process.stdout.write('no results were produced; CLI output:\n' + log.slice(-2000) + '\n');
      exitCode = 1;
    }

    if (args['write-baseline']) {
      writeBaseline(path.resolve(args['write-baseline']), args.line, results);
      process.stdout.write(`baseline written to ${args['write-baseline']}\n`);
    } else if (args.expect) {
      const baseline = JSON.parse(fs.readFileSync(path.resolve(args.expect), 'utf8'));
      const hub = args['hub-expect'] ? (JSON.parse(fs.readFileSync(path.resolve(args['hub-expect']), 'utf8')).lines?.[args.line] ?? {}) : {};
      const { regressions, notes } = compare(results, baseline, args.lenient, picked, hub);
      if (notes.length > 0) process.stdout.write(`HUB EXPECTATIONS:\n${notes.map((n) => `  ${n}`).join('\n')}\n`);
      if (regressions.length > 0) {
        process.stdout.write(`REGRESSIONS against ${args.expect}:\n${regressions.map((r) => `  ${r}`).join('\n')}\n`);
        exitCode = 1;
      } else {
        const checked = Object.keys(baseline.passing).filter((n) => (!picked || picked.includes(n)) && !hub.scenarios?.[n]);
        const excused = Object.keys(hub.scenarios ?? {}).filter((n) => n in baseline.passing && (!picked || picked.includes(n)));
        process.stdout.write(`all ${checked.length} expected scenarios pass${excused.length ? ` (${excused.length} excused through the hub)` : ''}\n`);
      }
    } else if (failed.length > 0 || results.size === 0) {
      exitCode = 1;
    }
  } finally {
    await fixture?.stop();
    if (!args.keep) fs.rmSync(outDir, { recursive: true, force: true });
  }
  process.exit(exitCode);
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(2);
});
