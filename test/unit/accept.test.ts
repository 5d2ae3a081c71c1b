import { describe, expect, it } from 'vitest';
import { acceptsType, namesType } from '../../src/downstream/accept.js';

const SSE = 'text/event-stream';

describe('acceptsType (RFC 9110 §12.5.1)', () => {
  it.each([
    ['application/json, text/event-stream', true],
    ['Application/JSON, Text/Event-Stream', true],
    ['TEXT/EVENT-STREAM', true],
    ['text/event-stream;charset=utf-8', true],
    ['application/json;q=0.9, text/event-stream;q=0.5', true],
    ['*/*', true],
    ['text/*', true],
    ['application/json', false],
    ['', false],
    ['text/event-streams', false],
    ['text/event-stream;q=0', false],
    ['text/event-stream; q=0.000', false],
    ['*/*, text/event-stream;q=0', false],
    ['text/*;q=0, */*', false],
    ['text/*;q=0, text/event-stream', true],
    ['text/event-stream;q=0, text/event-stream', true],
    ['text/event-stream;q=bogus', true],
  ])('%j: %s', (header, expected) => {
    expect(acceptsType(header, SSE)).toBe(expected);
  });
});

describe('namesType: the type named itself, not taken through a wildcard (the quiet-call stream asks for this)', () => {
  it.each([
    ['application/json, text/event-stream', true],
    ['Text/Event-Stream;q=0.5, */*', true],
    ['*/*', false],
    ['text/*', false],
    ['application/json, */*', false],
    ['', false],
    ['*/*, text/event-stream;q=0', false],
  ])('%j: %s', (header, expected) => {
    expect(namesType(header, SSE)).toBe(expected);
  });
});
