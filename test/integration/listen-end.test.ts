/**
 * A modern subscriptions/listen stream the hub ends on its own (here: it shuts down) ends
 * gracefully (digest §4.1): the listen request is answered, `resultType: "complete"` with the
 * subscription id (and the hub's serverInfo) in `_meta`, before the stream closes, so a client
 * can tell it from a dropped connection. The real built hub over HTTP, and `switchyard stdio`
 * stopped by a signal or by the end of its stdin.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT, startHub } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';
import { META_SERVER_INFO, modernBody, modernHeaders, parseMessages, waitForReady } from '../helpers/wire.js';

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

describe('a listen stream the hub ends', () => {
  it('is answered before it closes when the hub shuts down', async () => {
    const hub = await startHub({ servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') } });
    try {
      await waitForReady(hub.url, ['modern']);
      const res = await fetch(hub.url, {
        method: 'POST',
        headers: modernHeaders('subscriptions/listen'),
        body: JSON.stringify(modernBody('L-1', 'subscriptions/listen', { notifications: { toolsListChanged: true } })),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      while (!text.includes('notifications/subscriptions/acknowledged')) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before its acknowledgement: ${text}`);
        text += decoder.decode(value, { stream: true });
      }
      expect(await hub.stop()).toBe(0);
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      const messages = parseMessages('text/event-stream', text);
      expect(messages[0]?.method).toBe('notifications/subscriptions/acknowledged');
      expect(messages.at(-1)).toEqual({
        jsonrpc: '2.0',
        id: 'L-1',
        result: { resultType: 'complete', _meta: { [SUBSCRIPTION_ID]: 'L-1', [META_SERVER_INFO]: { name: 'switchyard', version: expect.any(String) } } },
      });
    } finally {
      if (hub.proc.exitCode === null) await hub.stop();
    }
  }, 60_000);

  for (const how of ['SIGTERM', 'stdin EOF'] as const)
    it(`is answered before \`switchyard stdio\` exits (${how})`, async () => {
      const d = mkdtempSync(join(tmpdir(), 'sy-listen-end-'));
      const file = join(d, 'hub.config.json');
      writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') } }));
      const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
      try {
        c.send(JSON.stringify(modernBody(7, 'subscriptions/listen', { notifications: { toolsListChanged: true } })));
        await c.next((m) => m.method === 'notifications/subscriptions/acknowledged');
        if (how === 'SIGTERM') c.proc.kill('SIGTERM');
        else c.proc.stdin!.end();
        expect(await c.exited).toBe(0);
        expect(c.received.at(-1)).toEqual({
          jsonrpc: '2.0',
          id: 7,
          result: { resultType: 'complete', _meta: { [SUBSCRIPTION_ID]: 7, [META_SERVER_INFO]: { name: 'switchyard', version: expect.any(String) } } },
        });
        expect(c.nonProtocolLines).toEqual([]);
      } finally {
        if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
        rmSync(d, { recursive: true, force: true });
      }
    }, 60_000);
});
