// The official MCP conformance server suites, run THROUGH the built hub: one hub per upstream era,
// each with the conformance fixture as its only upstream over stdio, unprefixed. With era "auto" the
// hub finds the fixture modern, so the legacy lines also exercise era translation; the legacy
// lines run a second time with the upstream forced legacy (the legacy ↔ legacy relay). Every scenario
// that passes directly against the fixture (the recorded direct baselines) must pass through the
// hub with at least the same SUCCESS checks, except the few documented in
// test/conformance/hub-expectations.json (see docs/CONFORMANCE.md).
//
// The lines of one era run one after another on that era's hub (a hub and its fixture cost
// ~2 s of CPU to start; seven of them were most of this file's CPU), the two eras at once. One
// after another, not at once: the lines share the hub's one upstream session, and a line's
// scenarios (logging level, subscriptions, list changes) must not see another line's. A hub that
// served one line must serve the next as a fresh one would: that it is still up and ready after
// the hostile requests of a line is checked before and after each.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { conformanceHubConfig } from '../conformance/hub.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');
const RUN = path.join(ROOT, 'test/conformance/run.mjs');
const HUB_EXPECT = 'test/conformance/hub-expectations.json';

const RUNS = [
  { line: '0.1', era: 'auto', baseline: 'test/conformance/baseline-direct-0.1.json' },
  { line: '0.2', era: 'auto', baseline: 'test/conformance/baseline-direct-0.2.json' },
  { line: '0.2-active', era: 'auto', baseline: 'test/conformance/baseline-direct-0.2-active.json' },
  { line: '0.1', era: '2025-11-25', baseline: 'test/conformance/baseline-direct-0.1.json' },
  { line: '0.2-active', era: '2025-11-25', baseline: 'test/conformance/baseline-direct-0.2-active.json' },
] as const;
const ERAS = ['auto', '2025-11-25'] as const;
type Era = (typeof ERAS)[number];

function runLine(line: string, url: string, baseline: string): Promise<{ code: number; stdout: string }> {
  const args = [RUN, '--line', line, '--url', url, '--expect', baseline, '--hub-expect', HUB_EXPECT, '--timeout', '150000'];
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: ROOT, timeout: 170_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof (error as { code?: unknown }).code === 'number' ? (error as { code: number }).code : 1) : 0;
      resolve({ code, stdout: stdout + stderr });
    });
  });
}

/**
 * Starts a hub per entry into `hubs`; every start is waited for, so afterAll stops each that
 * started even when another did not (which fails the hook).
 */
async function startAll(entries: [string, Parameters<typeof conformanceHubConfig>[0]][], hubs: Map<string, HubProcess>): Promise<void> {
  const settled = await Promise.allSettled(entries.map(([k, era]) => startHub(conformanceHubConfig(era)).then((h) => void hubs.set(k, h))));
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) throw failed.reason;
}

function tail(lines: string[], n = 60): string {
  return lines.slice(-n).join('\n');
}

/** One hub per upstream era, shared by this file's tests (see the header). */
const hubs = new Map<Era, HubProcess>();
/** Per hub, the end of the last run queued on it: a run waits for the one before. */
const turns = new Map<Era, Promise<unknown>>();
function onHub<T>(era: Era, fn: (hub: HubProcess) => Promise<T>): Promise<T> {
  const mine = (turns.get(era) ?? Promise.resolve()).then(() => fn(hubs.get(era)!));
  turns.set(era, mine.catch(() => undefined));
  return mine;
}

beforeAll(() => startAll(ERAS.map((era) => [era, era]), hubs), 60_000);

afterAll(async () => {
  await Promise.all([...hubs.values()].map((h) => h.stop()));
});

describe('official conformance suites through the hub', () => {
  // A line takes ~10-20 s on a loaded machine; the third on a hub waits for two before it.
  it.concurrent.for(RUNS)(
    'line $line, upstream era $era: every scenario that passes directly passes through the hub',
    { timeout: 400_000 },
    (run, { expect }) =>
      onHub(run.era, async (hub) => {
        const { line, baseline } = run;
        const servers = async () => ((await (await fetch(new URL('/healthz', hub.url))).json()) as { servers: { id: string; state: string; era: string }[] }).servers;
        // The fixture speaks both eras: "auto" must find it modern, however slowly it started.
        const era = run.era === 'auto' ? '2026-07-28' : run.era;
        await expect.poll(async () => (await servers())[0]?.state, { timeout: 60_000 }).toBe('ready');
        expect(await servers(), `hub log:\n${tail(hub.logs)}`).toEqual([expect.objectContaining({ id: 'conformance', era })]);
        const { code, stdout } = await runLine(line, hub.url, baseline);
        const context = `${stdout}\n--- hub log (tail) ---\n${tail(hub.logs)}`;
        expect(stdout, context).toMatch(/all \d+ expected scenarios pass/);
        expect(code, context).toBe(0);
        // The expectation list stays as short as possible: an entry that is no longer needed goes.
        expect(stdout, context).not.toContain('can go');
        // The suites threw malformed and hostile requests at it: it is still up and kept stdout clean.
        expect(hub.proc.exitCode, context).toBeNull();
        expect(hub.stdout()).toBe('');
        expect(await servers()).toEqual([expect.objectContaining({ id: 'conformance', state: 'ready', era })]);
      }),
  );
});

// resources-subscribe only checks that subscribing answers; this checks that updates really
// arrive: through a legacy upstream's resources/subscribe, and through the hub's own
// subscriptions/listen to a modern upstream (there is no resources/subscribe in that era).
describe('resource subscriptions through the hub reach the subscribing legacy session', () => {
  it.concurrent.for(ERAS)('upstream era %s: updated after subscribe, silent after unsubscribe', { timeout: 60_000 }, (era, { expect }) =>
    onHub(era, async (hub) => {
      await waitForReady(hub.url, ['conformance']);
      const client = new Client({ name: 'conformance-relay-test', version: '1.0.0' });
      const updates: string[] = [];
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updates.push(n.params.uri));
      await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
      try {
        const uri = 'test://watched-resource';
        await client.subscribeResource({ uri });
        await client.callTool({ name: 'test_trigger_resource_update', arguments: {} });
        await expect.poll(() => updates, { timeout: 5_000 }).toContain(uri);
        await client.unsubscribeResource({ uri });
        const before = updates.length;
        await client.callTool({ name: 'test_trigger_resource_update', arguments: {} });
        // A modern upstream's filter change is a new listen stream; give a stray update time to show.
        await new Promise((r) => setTimeout(r, 500));
        expect(updates.length, `hub log:\n${tail(hub.logs)}`).toBe(before);
      } finally {
        await client.close();
      }
    }),
  );
});
