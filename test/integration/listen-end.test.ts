/**
 * A modern subscriptions/listen stream the hub ends on its own (here: it shuts down) ends
 * gracefully (digest §4.1): the listen request is answered, `resultType: "complete"` with the
 * subscription id (and the hub's serverInfo) in `_meta`, before the stream closes, so a client
 * can tell it from a dropped connection. The real built hub over HTTP.
 */
import { describe, expect, it } from 'vitest';
import { nodeServer, startHub } from '../helpers/hub-process.js';
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
});
