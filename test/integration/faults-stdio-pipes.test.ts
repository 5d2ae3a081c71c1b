/**
 * Fault suite, stdio upstreams that mistreat their pipes: a last answer without its newline,
 * and what the hub does about it. Each case through the real hub, the fixture server over real
 * pipes, a raw modern client over loopback; every call has its audit row.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { queryRows } from './ledger-helpers.js';
import { callTool, FAULTS, healthOf, isToolError, rowsFor, text, waitForState } from './faults-helpers.js';

let hub: HubProcess;
let db: string;

function pipes(env: Record<string, string> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...nodeServer(`${FAULTS}/stdio-pipes.mjs`, [], env), ...extra };
}

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-pipes-'));
  hub = await startHub({ servers: { last: pipes({}, { timeoutMs: 8000 }) } }, { dir });
  db = join(hub.dir, 'ledger.db');
  await waitForState(hub.url, 'last', ['ready']);
}, 60_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
});

describe('stdio upstreams that mistreat their pipes', () => {
  it('answers without a trailing newline and exits: the answer still reaches the caller', async () => {
    const t0 = Date.now();
    const a = await callTool(hub.url, 'last__lastwords');
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(isToolError(a)).toBe(false);
    expect(text(a)).toBe('last words');
    const [row] = await rowsFor(db, 'last__lastwords');
    expect(row.outcome).toBe('ok');
    // The exit that followed is a restart like any other.
    await waitForState(hub.url, 'last', ['ready']);
    expect(isToolError(await callTool(hub.url, 'last__echo', { n: 1 }))).toBe(false);
  });

  it('every call above has its audit row, and the hub stayed up', async () => {
    const rows = (await queryRows(db, {}, 5000)).filter((r) => r.method === 'tools/call');
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(rows.every((r) => r.outcome !== 'in_flight')).toBe(true);
    expect((await healthOf(hub.url)).status).toBe('ok');
    expect(hub.proc.exitCode).toBeNull();
  });
});
