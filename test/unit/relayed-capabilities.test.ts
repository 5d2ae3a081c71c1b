/**
 * What the hub declares to an upstream on a client's behalf (src/router/forwarding.ts
 * relayedCapabilities): only what the hub itself can honour end to end (digest §8.4, §8.16):
 * elicitation (form, url), sampling (tools) and roots, which it relays. Not tasks (it routes no
 * `tasks/*` method), not sampling.context (the client's server is the hub), not `experimental`
 * nor any extension (a feature the hub does not know is one it cannot carry: its methods are
 * -32601 here, its result types -32603). The client's own object, not a copy, when there is
 * nothing to take (the common case, per call).
 */
import { describe, expect, it } from 'vitest';
import { relayedCapabilities } from '../../src/router/forwarding.js';

describe('relayedCapabilities', () => {
  it('is the same object when the client declared only what the hub relays', () => {
    const caps = { elicitation: { form: {}, url: {} }, sampling: { tools: {} }, roots: {} };
    expect(relayedCapabilities(caps)).toBe(caps);
    const none = {};
    expect(relayedCapabilities(none)).toBe(none);
    const legacyRoots = { roots: { listChanged: true }, elicitation: {} };
    expect(relayedCapabilities(legacyRoots)).toBe(legacyRoots);
  });

  it('takes out the 2025-11-25 tasks capability and every extension (the tasks one too), leaving the client object alone', () => {
    const caps = { tasks: { list: {} }, sampling: {}, extensions: { 'io.modelcontextprotocol/tasks': {}, 'x.example/e': { a: 1 } } };
    expect(relayedCapabilities(caps)).toEqual({ sampling: {} });
    expect(caps.extensions).toHaveProperty(['io.modelcontextprotocol/tasks']);
    expect(caps).toHaveProperty('tasks');
    expect(relayedCapabilities({ extensions: { 'io.modelcontextprotocol/tasks': {} } })).toEqual({});
    expect(relayedCapabilities({ elicitation: {}, extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } } })).toEqual({ elicitation: {} });
  });

  it('takes out experimental capabilities and families or members the hub does not know', () => {
    expect(relayedCapabilities({ experimental: { fancy: {} }, roots: {} })).toEqual({ roots: {} });
    // As a client may send them: neither schema has these.
    const unknown = JSON.parse('{"someday":{},"elicitation":{"form":{},"url":{},"later":{}}}') as Record<string, unknown>;
    expect(relayedCapabilities(unknown)).toEqual({ elicitation: { form: {}, url: {} } });
  });

  it('takes out sampling.context (a "thisServer" context through the hub would be every upstream\'s), keeping the rest of sampling', () => {
    const caps = { sampling: { context: {}, tools: {} }, roots: {} };
    expect(relayedCapabilities(caps)).toEqual({ sampling: { tools: {} }, roots: {} });
    expect(caps.sampling).toHaveProperty('context');
    expect(relayedCapabilities({ sampling: { context: {} } })).toEqual({ sampling: {} });
  });

  it('drops a key the client spelled "__proto__" without making it the prototype of the copy', () => {
    const caps = JSON.parse('{"__proto__":{"sampling":{}},"tasks":{},"elicitation":{"__proto__":{"a":1},"form":{}}}') as Record<string, unknown>;
    const out = relayedCapabilities(caps) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(out.elicitation)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(out))).toEqual({ elicitation: { form: {} } });
    expect((out as { sampling?: unknown }).sampling).toBeUndefined();
  });
});
