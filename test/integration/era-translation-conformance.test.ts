/**
 * Must-show 6 of "Era translation": the 0.2.0-alpha conformance `input-required-result-*`
 * server scenarios pass through the real built hub, with the conformance fixture (SDK v2,
 * modern) as its only upstream, unprefixed, over HTTP. Every check that passes against the
 * fixture directly (test/conformance/baseline-direct-0.2.json) must pass through the hub too:
 * the hub forwards `input_required` under its own sealed requestState (recipe C) and restores
 * the upstream's state byte-exact on the retry. Over stdio the same scenarios are run by
 * conformance.test.ts (line 0.2, upstream era auto: the whole line, these fourteen among its
 * expected passes, against the same baseline), so they are not run a second time here.
 *
 * Not run against a legacy upstream: these scenarios check the upstream's own inputRequests
 * keys (e.g. "user_name"), which a legacy server's real requests do not have; the hub's keys
 * for recipe A are its own (era-translation.test.ts covers that pair).
 *
 * The whole 0.2 line runs in ONE conformance CLI process and only these fourteen are judged
 * (run.mjs --only): a CLI process per scenario cost ~30 s of CPU for the fourteen, the whole
 * line (41 scenarios) ~3 s.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { waitForReady } from '../helpers/wire.js';

const FIXTURE = 'test/fixtures/conformance/server.mjs';
const SCENARIOS = [
  'basic-elicitation',
  'basic-list-roots',
  'basic-sampling',
  'capability-check',
  'ignore-extra-params',
  'missing-input-response',
  'multi-round',
  'multiple-input-requests',
  'non-tool-request',
  'request-state',
  'result-type',
  'tampered-state',
  'unsupported-methods',
  'validate-input',
].map((s) => `input-required-result-${s}`);

function runScenarios(url: string): Promise<{ code: number | null; out: string }> {
  const args = ['test/conformance/run.mjs', '--line', '0.2', '--url', url, '--expect', 'test/conformance/baseline-direct-0.2.json'];
  for (const s of SCENARIOS) args.push('--only', s);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (code) => resolve({ code, out }));
  });
}

describe('conformance 0.2 input-required-result-* through the hub, upstream over HTTP', () => {
  let hub: HubProcess;
  let fixture: HttpFixture | undefined;

  beforeAll(async () => {
    fixture = await startHttpFixture(FIXTURE);
    const conf = { url: fixture.url, prefix: '' };
    hub = await startHub({ servers: { conf } });
    const h = await waitForReady(hub.url, ['conf']);
    expect(h.servers[0].era).toBe('2026-07-28');
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
    await fixture?.stop();
  });

  it('every scenario passes with every check it passes directly', async () => {
    const { code, out } = await runScenarios(hub.url);
    expect(out).toContain(`${SCENARIOS.length}/${SCENARIOS.length} scenarios pass`);
    expect(out).toContain(`all ${SCENARIOS.length} expected scenarios pass`);
    expect(code, out).toBe(0);
  }, 180_000);
});
