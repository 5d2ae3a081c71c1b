/**
 * One JSON-RPC frame read as a message of either era (digest §1.1): what is a request, a
 * notification or a response, and what each malformed frame is refused as (-32700 for text
 * that is not JSON, -32600 for JSON that is no message), with the id kept whenever it is one.
 * The transports answer with exactly these errors (their integration tests send the frames).
 */
import { describe, expect, it } from 'vitest';
import { INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, RpcError } from '../../src/protocol/errors.js';
import { arrayOf, batchOf, classify, errorResponse, idKey, MAX_MESSAGE_DEPTH, parseFrame } from '../../src/protocol/jsonrpc.js';
import { Serialized } from '../../src/protocol/serialized.js';

/** A frame's kind, and for an invalid one its code, the id it kept and the reason. */
function read(text: string): { kind: string; code?: number; id?: unknown; why?: string } {
  const c = parseFrame(text);
  if (c.kind !== 'invalid') return { kind: c.kind };
  expect(c.error).toBeInstanceOf(RpcError);
  return { kind: 'invalid', code: c.error.code, ...('id' in c && c.id !== undefined ? { id: c.id } : {}), why: c.error.message };
}

describe('parseFrame', () => {
  it('reads requests, notifications and responses', () => {
    expect(read('{"jsonrpc":"2.0","id":1,"method":"tools/list"}')).toEqual({ kind: 'request' });
    expect(read('{"jsonrpc":"2.0","id":"a","method":"x","params":{}}')).toEqual({ kind: 'request' });
    expect(read('{"jsonrpc":"2.0","method":"notifications/initialized"}')).toEqual({ kind: 'notification' });
    expect(read('{"jsonrpc":"2.0","method":"x","params":{"a":1}}')).toEqual({ kind: 'notification' });
    expect(read('{"jsonrpc":"2.0","id":1,"result":{}}')).toEqual({ kind: 'response' });
    expect(read('{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}')).toEqual({ kind: 'response' });
    expect(read('{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}')).toEqual({ kind: 'response' }); // no id: an answer to what could not be read
  });

  it('takes as ids strings and the integers a JSON number keeps exactly, and nothing else', () => {
    for (const id of ['1', '0', '-5', '"x"', '""', String(Number.MAX_SAFE_INTEGER)]) expect(read(`{"jsonrpc":"2.0","id":${id},"method":"m"}`).kind, id).toBe('request');
    for (const id of ['null', '1.5', String(2 ** 53), 'true', '{}', '[1]']) {
      expect(read(`{"jsonrpc":"2.0","id":${id},"method":"m"}`), id).toEqual({ kind: 'invalid', code: INVALID_REQUEST, why: expect.stringMatching(/^id must be a string or an integer/) });
    }
  });

  it('refuses text that is not JSON with -32700, and JSON that is not one message with -32600', () => {
    expect(read('{"jsonrpc":"2.0",')).toEqual({ kind: 'invalid', code: PARSE_ERROR, why: 'parse error: invalid JSON' });
    expect(read('')).toMatchObject({ code: PARSE_ERROR });
    for (const batch of ['[]', '[{"jsonrpc":"2.0","id":1,"method":"x"}]']) expect(read(batch), batch).toEqual({ kind: 'invalid', code: INVALID_REQUEST, why: 'batch requests are not supported' });
    for (const text of ['1', '"x"', 'null', 'true']) expect(read(text), text).toEqual({ kind: 'invalid', code: INVALID_REQUEST, why: 'a JSON-RPC message must be an object' });
  });

  it('keeps the id of a malformed message that has one, so the answer can name it', () => {
    expect(read('{"jsonrpc":"1.0","id":7,"method":"x"}')).toEqual({ kind: 'invalid', code: INVALID_REQUEST, id: 7, why: 'jsonrpc must be "2.0"' });
    expect(read('{"id":"q","method":"x"}')).toEqual({ kind: 'invalid', code: INVALID_REQUEST, id: 'q', why: 'jsonrpc must be "2.0"' });
    for (const params of ['null', '"s"', '3']) {
      expect(read(`{"jsonrpc":"2.0","id":2,"method":"x","params":${params}}`), params).toEqual({ kind: 'invalid', code: INVALID_REQUEST, id: 2, why: 'params must be an object' });
    }
    // By position: a JSON-RPC Request, whose params no MCP method takes.
    const byPosition = 'Invalid params: params must be an object (MCP takes parameters by name, not by position)';
    expect(read('{"jsonrpc":"2.0","id":2,"method":"x","params":[1]}')).toEqual({ kind: 'invalid', code: INVALID_PARAMS, id: 2, why: byPosition });
    expect(read('{"jsonrpc":"2.0","method":"x","params":[1]}')).toEqual({ kind: 'invalid', code: INVALID_PARAMS, why: byPosition });
    for (const result of ['1', '[]', 'null', '"ok"']) {
      expect(read(`{"jsonrpc":"2.0","id":3,"result":${result}}`), result).toEqual({ kind: 'invalid', code: INVALID_REQUEST, id: 3, why: 'result must be an object' });
    }
    for (const error of ['"no"', '[]', 'null']) {
      expect(read(`{"jsonrpc":"2.0","id":4,"error":${error}}`), error).toEqual({ kind: 'invalid', code: INVALID_REQUEST, id: 4, why: 'error must be an object' });
    }
    // A method that is no string, and nothing that makes it a response: neither kind.
    expect(read('{"jsonrpc":"2.0","id":5,"method":5}')).toEqual({ kind: 'invalid', code: INVALID_REQUEST, id: 5, why: 'not a request, notification or response' });
    expect(read('{"jsonrpc":"2.0","id":6}')).toEqual({ kind: 'invalid', code: INVALID_REQUEST, id: 6, why: 'not a request, notification or response' });
    // Only an id (or a broken envelope with no method): no request, so for a question the hub
    // asked with that id, a malformed answer to it; one with a method is no answer.
    for (const text of ['{"jsonrpc":"2.0","id":6}', '{"id":"q","result":{}}', '{"jsonrpc":"1.0","id":"q"}']) expect(parseFrame(text), text).toMatchObject({ kind: 'invalid', methodless: true });
    for (const text of ['{"jsonrpc":"2.0","id":5,"method":5}', '{"jsonrpc":"1.0","id":1,"method":"x"}', '{"jsonrpc":"2.0"}', '{"jsonrpc":"2.0","id":null}'])
      expect(parseFrame(text), text).not.toHaveProperty('methodless');
    // An id that is no id is not kept.
    expect(read('{"jsonrpc":"1.0","id":1.5,"method":"x"}')).toEqual({ kind: 'invalid', code: INVALID_REQUEST, why: 'jsonrpc must be "2.0"' });
  });

  it('classifies a value already parsed the same way', () => {
    expect(classify({ jsonrpc: '2.0', id: 1, method: 'm' }).kind).toBe('request');
    expect(classify(undefined)).toMatchObject({ kind: 'invalid', error: { code: INVALID_REQUEST } });
  });
});

describe('ids, answers and batches', () => {
  it('keeps the string "1" and the number 1 apart as keys', () => {
    expect(idKey(1)).not.toBe(idKey('1'));
    expect(idKey('a')).toBe(idKey('a'));
  });

  it('keys a value that is no id apart from every id, without String() (which some objects make throw)', () => {
    expect(idKey(undefined)).not.toBe(idKey('undefined'));
    expect(idKey({ toString: 1 })).toBe('x:{"toString":1}');
    expect(idKey(null)).not.toBe(idKey('null'));
  });

  it('reads a response whose id is no string or integer (nor null) as no response', () => {
    for (const id of ['{"toString":1}', '[1]', '1.5', 'true']) {
      expect(read(`{"jsonrpc":"2.0","id":${id},"result":{}}`), id).toEqual({ kind: 'invalid', code: INVALID_REQUEST, why: 'a response id must be a string or an integer, or null' });
    }
    expect(read('{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}')).toEqual({ kind: 'response' });
    expect(read('{"jsonrpc":"2.0","error":{"code":1,"message":"x"}}')).toEqual({ kind: 'response' });
  });

  it('answers with the id when there is one (0 included), and without one otherwise', () => {
    const err = new RpcError(INVALID_REQUEST, 'bad');
    expect(errorResponse(0, err)).toEqual({ jsonrpc: '2.0', id: 0, error: { code: INVALID_REQUEST, message: 'bad' } });
    expect(errorResponse(null, err)).toEqual({ jsonrpc: '2.0', error: { code: INVALID_REQUEST, message: 'bad' } });
    expect(errorResponse(undefined, { code: -1, message: 'x' })).toEqual({ jsonrpc: '2.0', error: { code: -1, message: 'x' } });
    expect('id' in errorResponse(undefined, err)).toBe(false);
  });

  it('refuses params, a result or an error nested past MAX_MESSAGE_DEPTH, and takes one at the limit', () => {
    const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);
    // params is the first level: the value inside it may nest MAX_MESSAGE_DEPTH - 1 more.
    expect(parseFrame(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":${nest(MAX_MESSAGE_DEPTH - 1)}}}`).kind).toBe('request');
    expect(parseFrame(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":${nest(MAX_MESSAGE_DEPTH)}}}`)).toMatchObject({ kind: 'invalid', id: 1, method: 'm', error: { code: -32602 } });
    expect(parseFrame(`{"jsonrpc":"2.0","method":"n","params":{"a":${nest(5000)}}}`)).toMatchObject({ kind: 'invalid', method: 'n' });
    expect(parseFrame(`{"jsonrpc":"2.0","id":2,"result":{"a":${nest(5000)}}}`)).toMatchObject({ kind: 'invalid', id: 2, error: { code: INVALID_REQUEST } });
    expect(parseFrame(`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m","data":${nest(5000)}}}`)).toMatchObject({ kind: 'invalid', id: 3 });
  });

  it('reads a frame as a batch only when it is a JSON array', () => {
    expect(batchOf(' [1, {"a":2}]')).toEqual([1, { a: 2 }]);
    expect(batchOf('{"a":1}')).toBeUndefined();
    expect(batchOf('[1,')).toBeUndefined();
    expect(arrayOf([{ a: 1 }, new Serialized('{"b":2}')]).text).toBe('[{"a":1},{"b":2}]');
  });
});
