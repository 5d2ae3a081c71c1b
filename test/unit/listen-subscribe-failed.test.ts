/**
 * A listen stream whose resource subscriptions fail (HubCore.subscribeResources rejects): the
 * stream still opens for the list changes it asked for, its acknowledgement honours none of the
 * URIs (how the spec has a server tell its client: the acknowledged subset, digest §4.1; an error
 * would end the stream and its list changes with it), the failure is logged at warn with the
 * server it names and why, and what was subscribed before it failed is let go.
 */
import { EventEmitter } from 'node:events';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Canceller } from '../../src/cancel.js';
import { UpstreamUnavailableError } from '../../src/protocol/errors.js';
import type { HubCore, MessageSink } from '../../src/downstream/core.js';
import type { Exchange } from '../../src/downstream/exchange.js';
import { ListenHub } from '../../src/downstream/listen.js';

describe('ListenHub, its resource subscriptions failing', () => {
  it('opens the stream honouring no URI, logs the failure at warn with the server and why, and lets go what it held', async () => {
    const closed: string[] = [];
    const core = {
      serverInfo: { name: 'switchyard', version: 'test' },
      events: new EventEmitter(),
      sessionClosed: (key: string) => void closed.push(key),
      subscribeResources: () => Promise.reject(new UpstreamUnavailableError('files', 'restarting', 'process exited with code 1')),
    } as unknown as HubCore;
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => void lines.push(l) });
    const sent: Record<string, unknown>[] = [];
    const sink = { send: (m: object) => void sent.push(m as Record<string, unknown>), closed: false, end: () => undefined } as MessageSink & { end(): void };
    const replies: unknown[] = [];
    const ex = {
      transport: 'http',
      header: () => undefined,
      principal: 'alice',
      requestBytes: 0,
      sink,
      reply: (m: unknown, status?: number) => void replies.push([m, status]),
      closed: new Canceller().signal,
      stream: () => sink,
    } as unknown as Exchange;
    const hub = new ListenHub(core, log);
    const opened = await hub.open({ jsonrpc: '2.0', id: 7, method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true, resourceSubscriptions: ['file:///a', 'file:///b'] } } }, ex, () => undefined);
    expect(opened).toBe(true);
    expect(replies).toEqual([]);
    expect(sent).toEqual([
      { jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications: { toolsListChanged: true }, _meta: { 'io.modelcontextprotocol/subscriptionId': 7 } } },
    ]);
    const warned = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(warned).toEqual([
      expect.objectContaining({ level: 40, server: 'files', principal: 'alice', uris: 2, err: 'server "files" is restarting: process exited with code 1', msg: expect.stringContaining('resource subscriptions') }),
    ]);
    // Its subscriber key, released (a URI subscribed before the failure was held for good).
    expect(closed).toHaveLength(1);
    expect(closed[0]).toMatch(/^listen:/);
    hub.closeAll();
  });
});
