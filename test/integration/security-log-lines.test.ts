/**
 * What an upstream said, in a log line that carries an error as text (`err: String(e)`,
 * `e.message`) rather than as an Error for the `err` serializer: redacted as the serializer's
 * message is. The real built hub, a real stdio upstream whose tools/list answer the hub refuses,
 * quoting what the upstream sent in the error it logs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from './ledger-helpers.js';

const SAID = { password: 'hunter2-x9', token: 'tk-77' };
let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { f: nodeServer('test/fixtures/faults/stdio-faults.mjs', [], { FAULT_LIST_CURSOR: JSON.stringify(SAID) }) } });
  await waitForReady(hub.url, ['f']);
}, 30_000);
afterAll(async () => void (await hub?.stop()));

/** The first log line `pick` accepts, as it is written (awaited on the hub's stderr). */
function logLine(pick: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const look = (): boolean => {
      for (const l of hub.logs) {
        let o: Record<string, unknown>;
        try {
          o = JSON.parse(l) as Record<string, unknown>;
        } catch {
          continue;
        }
        if (pick(o)) {
          hub.proc.stderr!.off('data', onData);
          resolve(o);
          return true;
        }
      }
      return false;
    };
    const onData = () => void setImmediate(look);
    hub.proc.stderr!.on('data', onData);
    look();
  });
}

describe('a log line with an error as text', () => {
  it("redacts the credentials in what the upstream said (the list it answered refused, quoting its nextCursor)", async () => {
    const seen = logLine((o) => typeof o.err === 'string' && o.err.includes('nextCursor'));
    // A client's tools/list has the hub fetch the upstream's list.
    const client = new Client({ name: 'log-lines', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    try {
      await client.listTools().catch(() => undefined);
    } finally {
      await client.close();
    }
    const line = await seen;
    expect(line.err).toContain('{"password":"[redacted:credential]');
    const all = hub.logs.join('\n');
    expect(all).toContain('nextCursor');
    for (const secret of ['hunter2-x9']) expect(all).not.toContain(secret);
  }, 20_000);
});
