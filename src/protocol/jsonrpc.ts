import { INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, RpcError, type RpcErrorObject } from './errors.js';
import { Serialized, wireText } from './serialized.js';
import { redactConfigSecrets } from '../policy/config-secrets.js';
import { shownValue } from './shown-value.js';

export type Id = string | number;
export type Params = Record<string, unknown>;

export interface Request {
  jsonrpc: '2.0';
  id: Id;
  method: string;
  params?: Params;
}
export interface Notification {
  jsonrpc: '2.0';
  method: string;
  params?: Params;
}
export interface SuccessResponse {
  jsonrpc: '2.0';
  id: Id;
  result: Record<string, unknown>;
}
export interface ErrorResponse {
  jsonrpc: '2.0';
  id?: Id | null;
  error: RpcErrorObject;
}
export type Response = SuccessResponse | ErrorResponse;
export type Message = Request | Notification | Response;

export type Classified =
  | { kind: 'request'; msg: Request }
  | { kind: 'notification'; msg: Notification }
  | { kind: 'response'; msg: Response }
  | {
      kind: 'invalid';
      error: RpcError;
      id?: Id;
      method?: string;
      /** The tool or prompt name, or resource URI, its params named (for its ledger row). */
      target?: string;
      /** It has a result or an error: an answer to request `id`. */
      response?: true;
      /**
       * It has an id and no method, nor a result or error, or it breaks the envelope (`jsonrpc`)
       * without a method: no request, so if `id` names a question the hub put to the client it can
       * only be a malformed answer to it.
       */
      methodless?: true;
      /**
       * The malformed object as sent (a message that breaks the envelope or has no id of a valid
       * type), kept for its row's era: its method and `_meta` claim say it as a well-formed
       * one's would (eraOfRequest), where the row records neither.
       */
      message?: Record<string, unknown>;
      /** A batch refused whole: its members, whose requests are recorded one by one. */
      members?: readonly unknown[];
      /**
       * A JSON-RPC notification (no id) whose params are by position: a valid notification,
       * which JSON-RPC never answers, whose params no MCP method takes.
       */
      notification?: true;
    };

// Integers only (digest §1.1), and only those a JSON number keeps exactly: a larger one would
// be answered with an id other than the one sent.
const isId = (v: unknown): v is Id => typeof v === 'string' || (typeof v === 'number' && Number.isSafeInteger(v));

/**
 * A map key for a request id that keeps its type: the string "1" and the number 1 are different
 * ids, so a notifications/cancelled for one must not cancel the other.
 */
export function idKey(id: unknown): string {
  if (typeof id === 'number') return `n:${id}`;
  if (typeof id === 'string') return `s:${id}`;
  // No id at all (a notifications/cancelled without requestId, a value of another type): a key
  // no string id has, and one String() cannot fail to make ({"toString": 1} has no primitive).
  return `x:${shownValue(id)}`;
}
/** A JSON object: not null, not an array. */
export const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * How deep a message's params, result or error may nest. JSON.parse takes any depth, but
 * JSON.stringify and every recursive walk (canonical hashing, schema checks, copies) overflow
 * the stack a few thousand levels down: such a message is refused where it comes in.
 */
export const MAX_MESSAGE_DEPTH = 1000;

/** Whether `v` has objects or arrays nested more than `left` levels deep. */
function deeperThan(v: unknown, left: number): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (left === 0) return true;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (deeperThan(v[i], left - 1)) return true;
    return false;
  }
  for (const k in v) if (deeperThan((v as Record<string, unknown>)[k], left - 1)) return true;
  return false;
}

/** Why JSON that is an object with `jsonrpc: "2.0"` is still no message: no method, result or error. */
export const NOT_A_MESSAGE = 'not a request, notification or response';

const TOO_DEEP = `nested more than ${MAX_MESSAGE_DEPTH} levels deep`;

/**
 * Validate a parsed value as one JSON-RPC message of either era. Batches are not part of
 * either era (digest §1.1); ids are never null.
 */
export function classify(v: unknown): Classified {
  if (Array.isArray(v)) return { kind: 'invalid', error: new RpcError(INVALID_REQUEST, 'batch requests are not supported') };
  if (!isObj(v)) return { kind: 'invalid', error: new RpcError(INVALID_REQUEST, 'a JSON-RPC message must be an object') };
  const id = isId(v.id) ? v.id : undefined;
  if (v.jsonrpc !== '2.0') {
    const error = new RpcError(INVALID_REQUEST, 'jsonrpc must be "2.0"');
    return id !== undefined && v.method === undefined ? { kind: 'invalid', error, id, methodless: true, message: v } : { kind: 'invalid', error, id, message: v };
  }
  if (typeof v.method === 'string') {
    // Its method is known: its row is found by it, as a well-formed request's is. JSON-RPC 2.0
    // params are an array (by position) or an object (by name): an array is a valid Request
    // whose params no MCP method takes (every one is by name), so invalid params (-32602), in
    // either era; anything else is no Request at all (-32600).
    if (v.params !== undefined && !isObj(v.params))
      return Array.isArray(v.params)
        ? { kind: 'invalid', error: new RpcError(INVALID_PARAMS, 'Invalid params: params must be an object (MCP takes parameters by name, not by position)'), id, method: v.method, ...('id' in v ? {} : { notification: true as const }) }
        : { kind: 'invalid', error: new RpcError(INVALID_REQUEST, 'params must be an object'), id, method: v.method };
    if (v.params !== undefined && deeperThan(v.params, MAX_MESSAGE_DEPTH)) {
      const p = v.params as Record<string, unknown>;
      const target = typeof p.name === 'string' ? p.name : typeof p.uri === 'string' ? p.uri : undefined;
      return { kind: 'invalid', error: new RpcError(INVALID_PARAMS, `Invalid params: ${TOO_DEEP}`), id, method: v.method, target };
    }
    if (!('id' in v)) return { kind: 'notification', msg: v as unknown as Notification };
    if (id === undefined) return { kind: 'invalid', error: new RpcError(INVALID_REQUEST, 'id must be a string or an integer (at most 2^53 - 1 in size), never null'), message: v };
    return { kind: 'request', msg: v as unknown as Request };
  }
  if ('result' in v || 'error' in v) {
    // A response's id is its request's (a string or an integer), or null when that could not be
    // read: of another type it answers nothing, and is no response ({"toString": 1} made
    // String(id) throw where the answer was looked up: a 500 and an error logged, over either edge).
    if (v.id !== undefined && v.id !== null && id === undefined) return { kind: 'invalid', error: new RpcError(INVALID_REQUEST, 'a response id must be a string or an integer, or null'), response: true };
    if ('result' in v && !isObj(v.result)) return { kind: 'invalid', error: new RpcError(INVALID_REQUEST, 'result must be an object'), id, response: true };
    if ('error' in v && !isObj(v.error)) return { kind: 'invalid', error: new RpcError(INVALID_REQUEST, 'error must be an object'), id, response: true };
    if (deeperThan('result' in v ? v.result : v.error, MAX_MESSAGE_DEPTH)) return { kind: 'invalid', error: new RpcError(INVALID_REQUEST, `a response ${TOO_DEEP}`), id, response: true };
    return { kind: 'response', msg: v as unknown as Response };
  }
  const error = new RpcError(INVALID_REQUEST, NOT_A_MESSAGE);
  return id !== undefined && v.method === undefined ? { kind: 'invalid', error, id, methodless: true, message: v } : { kind: 'invalid', error, id, message: v };
}

/** Parse one frame (a stdio line or an HTTP body). */
export function parseFrame(text: string): Classified {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { kind: 'invalid', error: new RpcError(PARSE_ERROR, 'parse error: invalid JSON') };
  }
  return classify(v);
}

export function errorResponse(id: Id | undefined | null, err: RpcError | RpcErrorObject): ErrorResponse {
  let error = err instanceof RpcError ? err.toJSON() : err;
  // Whatever built the message (an upstream's text, a transport error), the config's own
  // secret values never leave in it (policy/config-secrets.ts); an error path only.
  if (typeof error.message === 'string') {
    const message = redactConfigSecrets(error.message);
    if (message !== error.message) error = { ...error, message };
  }
  return id === undefined || id === null ? { jsonrpc: '2.0', error } : { jsonrpc: '2.0', id, error };
}
export function resultResponse(id: Id, result: Record<string, unknown>): SuccessResponse {
  return { jsonrpc: '2.0', id, result };
}
export function isErrorResponse(r: Response): r is ErrorResponse {
  return 'error' in r;
}

/** The only revision with JSON-RPC batches (added there, removed in 2025-06-18). */
export const BATCH_VERSION = '2025-03-26';

/** The members of a frame that is a JSON array; undefined otherwise (left to parseFrame). */
export function batchOf(text: string): unknown[] | undefined {
  if (!text.trimStart().startsWith('[')) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A batch member's size as JSON. JSON.parse takes any depth, JSON.stringify overflows the stack
 * a few thousand levels down: a member nested that deep outside params (which classify bounds)
 * is served as a lone message would be, counted as the whole batch's size. (Over stdio the
 * overflow ended the hub.)
 */
export function memberBytes(member: unknown, batchBytes: number): number {
  try {
    return Buffer.byteLength(JSON.stringify(member) ?? '');
  } catch {
    return batchBytes;
  }
}

/** A batch's answers as one message, each as its wire text (an answer may come pre-serialised; none of a legacy member does today). */
export function arrayOf(messages: readonly object[]): Serialized {
  return new Serialized(`[${messages.map(wireText).join(',')}]`);
}
