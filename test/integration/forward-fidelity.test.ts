/**
 * What the hub does not understand in a request's params reaches the upstream as it came: the
 * forwarded params are a copy with the upstream's tool name and the hub's own _meta envelope,
 * the client's pass-through _meta keys kept, and nothing else changes, a key named `__proto__`
 * included (a copy made by setting fields would turn that key into the copy's prototype: it
 * would vanish from the wire, or its fields would turn up as keys of their own).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { perProcess } from './upstream-helpers.js';
import { QUIRKS, waitForState } from './faults-helpers.js';
import { legacySession, modernCall, type Json } from './ledger-helpers.js';

let hub: HubProcess;
let dir: string;

const received = (id: string) => perProcess(join(dir, `${id}.log`)).flat().filter((m) => m.method === 'tools/call');

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'switchyard-fidelity-'));
  hub = await startHub(
    {
      servers: {
        modern: nodeServer(`${QUIRKS}/modern.mjs`, [], { QUIRK_LOG: join(dir, 'modern.log') }),
        legacy: nodeServer(`${QUIRKS}/legacy-32601.mjs`, [], { QUIRK_LOG: join(dir, 'legacy.log') }),
      },
      ledger: { enabled: false },
    },
    { dir },
  );
  await Promise.all(['modern', 'legacy'].map((id) => waitForState(hub.url, id, ['ready'])));
}, 60_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
});

describe.each(['modern', 'legacy'])('tools/call to a %s upstream', (id) => {
  it('forwards unknown params, a "__proto__" key among them, unchanged', async () => {
    // JSON.parse makes "__proto__" an own field, as the hub's own parser does.
    const params = JSON.parse(`{"name":"${id}__echo","arguments":{"a":1},"__proto__":{"polluted":true},"x-vendor":{"k":[1,2]}}`) as Json;
    const meta = JSON.parse('{"example.com/trace":"t-1","__proto__":{"m":1}}') as Json;
    const a = await modernCall(hub.url, `f-${id}`, 'tools/call', params, { meta });
    expect(a.status).toBe(200);
    expect(a.body?.result?.isError).not.toBe(true);
    const [sent] = received(id);
    expect(sent).toBeDefined();
    const p = sent.params as Record<string, unknown>;
    expect(p.name).toBe('echo');
    expect(p.arguments).toEqual({ a: 1 });
    expect(p['x-vendor']).toEqual({ k: [1, 2] });
    expect(Object.hasOwn(p, '__proto__')).toBe(true);
    expect(p['__proto__']).toEqual({ polluted: true });
    // The client's pass-through _meta keys travel too, "__proto__" among them, as keys; the
    // envelope's keys are the hub's own.
    const sentMeta = p._meta as Record<string, unknown>;
    expect(sentMeta['example.com/trace']).toBe('t-1');
    expect(Object.hasOwn(sentMeta, '__proto__')).toBe(true);
    expect(sentMeta['__proto__']).toEqual({ m: 1 });
    expect(Object.hasOwn(sentMeta, 'm')).toBe(false);
    if (id === 'modern') expect((sentMeta['io.modelcontextprotocol/clientInfo'] as { name?: string }).name).toBe('switchyard');
    else expect(sentMeta['io.modelcontextprotocol/clientInfo']).toBeUndefined();
  });

  it('passes a W3C trace on as a span of the hub’s under the client’s (or one it starts), from either era', async () => {
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parent = '00f067aa0ba902b7';
    const sentWith = (mark: string) => received(id).find((m) => (m.params as Json).arguments && ((m.params as Json).arguments as Json).mark === mark)?.params as Json | undefined;
    const meta = { traceparent: `00-${trace}-${parent}-00`, tracestate: 'congo=t61rcWkgMzE', baggage: 'user=7' };
    expect((await modernCall(hub.url, `t-${id}`, 'tools/call', { name: `${id}__echo`, arguments: { mark: 'modern' } }, { meta })).status).toBe(200);
    const underCaller = sentWith('modern')?._meta as Json;
    expect(underCaller.traceparent).toMatch(new RegExp(`^00-${trace}-[0-9a-f]{16}-00$`));
    expect(underCaller.traceparent).not.toContain(parent);
    expect([underCaller.tracestate, underCaller.baggage]).toEqual([meta.tracestate, meta.baggage]);
    // A legacy client whose traceparent is no valid one: the hub starts a trace (sampled), and
    // the tracestate of the trace it left goes no further.
    const legacy = await legacySession(hub.url);
    const bad = { traceparent: `00-${trace.toUpperCase()}-${parent}-01`, tracestate: 'congo=t61rcWkgMzE', baggage: 'user=7' };
    expect((await legacy.call(`t-${id}`, 'tools/call', { name: `${id}__echo`, arguments: { mark: 'legacy' }, _meta: bad })).status).toBe(200);
    const started = sentWith('legacy')?._meta as Json;
    expect(started.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(started.traceparent).not.toContain(trace);
    expect(started.tracestate).toBeUndefined();
    expect(started.baggage).toBe('user=7');
    // An OpenTelemetry-instrumented HTTP client puts it in a `traceparent` header: taken when
    // `_meta` names none, from either era, with its `tracestate` header; `_meta`'s (MCP's own)
    // wins over both.
    const header = { traceparent: `00-${trace}-${parent}-01`, tracestate: 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE' };
    expect((await modernCall(hub.url, `th-${id}`, 'tools/call', { name: `${id}__echo`, arguments: { mark: 'modern-header' } }, { headers: header })).status).toBe(200);
    expect((sentWith('modern-header')?._meta as Json).traceparent).toMatch(new RegExp(`^00-${trace}-[0-9a-f]{16}-01$`));
    expect((sentWith('modern-header')?._meta as Json).tracestate).toBe(header.tracestate);
    expect((await legacy.call(`th-${id}`, 'tools/call', { name: `${id}__echo`, arguments: { mark: 'legacy-header' } }, header)).status).toBe(200);
    expect((sentWith('legacy-header')?._meta as Json).traceparent).toMatch(new RegExp(`^00-${trace}-[0-9a-f]{16}-01$`));
    expect((sentWith('legacy-header')?._meta as Json).tracestate).toBe(header.tracestate);
    const other = '0af7651916cd43dd8448eb211c80319c';
    expect((await modernCall(hub.url, `tb-${id}`, 'tools/call', { name: `${id}__echo`, arguments: { mark: 'both' } }, { headers: header, meta: { traceparent: `00-${other}-${parent}-01` } })).status).toBe(200);
    expect((sentWith('both')?._meta as Json).traceparent).toMatch(new RegExp(`^00-${other}-`));
    expect((sentWith('both')?._meta as Json).tracestate).toBeUndefined();
    // A header traceparent no one can read starts a trace: its tracestate stays behind.
    expect((await modernCall(hub.url, `tx-${id}`, 'tools/call', { name: `${id}__echo`, arguments: { mark: 'bad-header' } }, { headers: { ...header, traceparent: 'nonsense' } })).status).toBe(200);
    expect((sentWith('bad-header')?._meta as Json).tracestate).toBeUndefined();
  });

  it('refuses a legacy client’s _meta that is no object, or a progressToken that is no integer, with -32602, forwarding nothing', async () => {
    // Both eras' schema: `_meta` is an object, a ProgressToken a string or an integer (the modern
    // check refuses the same); read as none, or echoed back, they hid the client's mistake.
    const legacy = await legacySession(hub.url);
    const odd: [string, unknown][] = [['string', 'str'], ['array', ['a', 'b']], ['null', null], ['fraction', { progressToken: 1.5 }], ['huge', { progressToken: 1e300 }]];
    for (const [mark, meta] of odd) {
      const a = await legacy.call(`nm-${id}-${mark}`, 'tools/call', { name: `${id}__echo`, arguments: { mark }, _meta: meta });
      expect(a.status, mark).toBe(200);
      expect(a.body?.error, mark).toMatchObject({ code: -32602, message: expect.stringMatching(/_meta/) });
    }
    // A well-formed one after them still goes, and is the only one the upstream saw.
    expect((await legacy.call(`nm-${id}-ok`, 'tools/call', { name: `${id}__echo`, arguments: { mark: 'ok' }, _meta: { progressToken: 7 } })).body?.result).toBeDefined();
    const marks = received(id).map((m) => ((m.params as Json).arguments as Json | undefined)?.mark).filter((m) => m !== undefined);
    expect(marks.filter((m) => odd.some(([k]) => k === m))).toEqual([]);
    expect(marks).toContain('ok');
  });

  it("passes the upstream's progress notification on with its _meta, under the client's token", async () => {
    const name = `${id}__slow`;
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': name },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: `p-${id}`,
        method: 'tools/call',
        params: {
          name,
          arguments: { steps: 1, interval: 10, progressMeta: { 'example.com/step': 'one' } },
          _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, progressToken: 'mine' },
        },
      }),
    });
    const events = (await res.text()).split('\n').filter((l) => l.startsWith('data:')).map((l) => JSON.parse(l.slice(5)) as Json);
    const progress = events.find((m) => m.method === 'notifications/progress');
    expect(progress?.params, JSON.stringify(events)).toEqual({ progressToken: 'mine', progress: 1, total: 1, message: 'step 1', _meta: { 'example.com/step': 'one' } });
  });
});
