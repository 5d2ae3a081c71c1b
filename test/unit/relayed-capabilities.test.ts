/**
 * What the hub declares to an upstream on a client's behalf (src/router/forwarding.ts
 * relayedCapabilities): the client's capabilities without tasks, which the hub cannot relay, nor
 * sampling.context;
 * the client's own object, not a copy, when there is nothing to take (the common case, per call).
 */
import { describe, expect, it } from 'vitest';
import { relayedCapabilities } from '../../src/router/forwarding.js';

describe('relayedCapabilities', () => {
  it('is the same object when the client declared no tasks', () => {
    const caps = { elicitation: { form: {}, url: {} }, sampling: { tools: {} }, roots: {}, extensions: { 'io.modelcontextprotocol/ui': {} } };
    expect(relayedCapabilities(caps)).toBe(caps);
    const none = {};
    expect(relayedCapabilities(none)).toBe(none);
  });

  it('takes out the tasks extension and the 2025-11-25 tasks capability, leaving the client object alone', () => {
    const caps = { tasks: { list: {} }, sampling: {}, extensions: { 'io.modelcontextprotocol/tasks': {}, 'x.example/e': { a: 1 } } };
    expect(relayedCapabilities(caps)).toEqual({ sampling: {}, extensions: { 'x.example/e': { a: 1 } } });
    expect(caps.extensions).toHaveProperty(['io.modelcontextprotocol/tasks']);
    expect(caps).toHaveProperty('tasks');
    expect(relayedCapabilities({ extensions: { 'io.modelcontextprotocol/tasks': {} } })).toEqual({ extensions: {} });
  });

  it('takes out sampling.context (a "thisServer" context through the hub would be every upstream\'s), keeping the rest of sampling', () => {
    const caps = { sampling: { context: {}, tools: {} }, roots: {} };
    expect(relayedCapabilities(caps)).toEqual({ sampling: { tools: {} }, roots: {} });
    expect(caps.sampling).toHaveProperty('context');
    expect(relayedCapabilities({ sampling: { context: {} } })).toEqual({ sampling: {} });
  });

  it('keeps a key the client spelled "__proto__" a field of the copy, not its prototype', () => {
    const caps = JSON.parse('{"__proto__":{"sampling":{}},"tasks":{},"extensions":{"__proto__":{"a":1},"io.modelcontextprotocol/tasks":{}}}') as Record<string, unknown>;
    const out = relayedCapabilities(caps) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(out.extensions)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(out))).toEqual(JSON.parse('{"__proto__":{"sampling":{}},"extensions":{"__proto__":{"a":1}}}'));
  });
});
