/**
 * Frames for the wire property tests (wire-fuzz-http, wire-fuzz-stdio): odd ids written as raw
 * JSON text, unicode and NUL in ids, duplicate keys, deep nesting, notifications that carry an
 * id, responses a client sends, methods of the other era, headers that disagree with the body,
 * media types, batches. Each frame says what the protocol owes it (digest §1, §1.3, §6.2, §6.3):
 * the HTTP status, the JSON-RPC code, the id the answer carries (the id sent, or none when it
 * could not be read), or no answer at all; and how many ledger rows it makes (README, The
 * ledger: every request that reaches the hub, a malformed one too; no notification, no response).
 * Protocol constants are spelled out here rather than imported from src/.
 */
import fc from 'fast-check';

export const MODERN = '2026-07-28';
export const LEGACY = '2025-11-25';
/** The one revision with batches (digest §1.1). */
export const BATCHES = '2025-03-26';
export const PV = 'io.modelcontextprotocol/protocolVersion';
export const CAPS = 'io.modelcontextprotocol/clientCapabilities';
export const INFO = 'io.modelcontextprotocol/clientInfo';
/** listen.maxBodyBytes of the hubs under test. */
export const MAX_BODY = 65_536;
/** Tools of the two fixture upstreams that echo their arguments (ql: 2025-11-25, qm: 2026-07-28). */
export const ECHO_TOOLS = ['ql__echo', 'qm__echo'];

/** A header value that means: leave the header out. */
export const DELETE = '\u0000delete';

export type Era = 'modern' | 'legacy' | 'batches';
type Obj = Record<string, unknown>;

/** What the hub owes one frame. */
export interface Owed {
  /** HTTP status (HTTP only); a list: any of them. */
  status?: number | readonly number[];
  /** A result (no error) is owed. */
  ok?: true;
  /** The error code owed. */
  code?: number;
  /** The id the answer carries; undefined: none (the request's could not be read). */
  id?: string | number;
  /** No answer at all (a notification, a client's response): 202 and no body over HTTP, no line over stdio. */
  none?: true;
  /** A batch: the answers its members are owed, by id ('' for one without an id). */
  members?: Owed[];
}

export interface Frame {
  kind: string;
  era: Era;
  /** The body, or the stdio line. */
  text: string;
  /** HTTP headers besides the era's usual ones ('' deletes one). */
  headers: Record<string, string>;
  owed: Owed;
  /** Where stdio (no headers, no status) owes another answer. */
  stdioOwed?: Owed;
  /** A matter of HTTP headers alone. */
  httpOnly?: true;
  /** Ledger rows the frame makes. */
  rows: number;
  /** A string id whose row must be found exactly once. */
  rowId?: string;
  /** What else its HTTP answer's headers must be (null: they are). */
  checkHeaders?: (header: (name: string) => string | null) => string | null;
  /** What else its answer must be (null: it is). */
  check?: (m: Msg) => string | null;
  /** Over stdio on a 2025-03-26 session, which takes a batch no header calls modern: what it is owed, with no row. */
  batchSessionOwed?: Owed;
  /** What else its row (found by rowId) must say. */
  rowCheck?: (r: { clientName: string | null; clientVersion: string | null; method: string }) => string | null;
}

export const envelope = (): Obj => ({ [PV]: MODERN, [CAPS]: {}, [INFO]: { name: 'wire-fuzz', version: '1' } });

/** A request of `era` as its client sends it. */
export function request(era: Era, id: unknown, method: string, params: Obj = {}): Obj {
  return { jsonrpc: '2.0', id, method, params: era === 'modern' ? { ...params, _meta: { ...envelope(), ...(params._meta as Obj | undefined) } } : params };
}

/** The sentinel form of a header value (digest §3.4), written here from the rule, not the hub's code. */
export const sentinel = (v: string): string => `=?base64?${Buffer.from(v, 'utf8').toString('base64')}?=`;

/** The headers a client of `era` sends with a request of `method` (Mcp-Name: `name`); the session is filled in at send time. */
export function eraHeaders(era: Era, method: string | undefined, name?: string): Record<string, string> {
  const h: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (era === 'modern') {
    h['mcp-protocol-version'] = MODERN;
    if (method !== undefined) h['mcp-method'] = method;
    if (name !== undefined) h['mcp-name'] = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(name) && !name.startsWith('=?base64?') ? name : sentinel(name);
  } else {
    h['mcp-protocol-version'] = era === 'batches' ? BATCHES : LEGACY;
    h['mcp-session-id'] = `{session:${era}}`;
  }
  return h;
}

/** A frame whose id is the string `uid` (its row found by it) or none. */
const ROW = 1;

/** 404 for a method a modern client's era lacks (digest §6.3), in-band for a legacy one. */
const notFoundStatus = (era: Era): number => (era === 'modern' ? 404 : 200);

/** Code units a JSON string may carry that a careless writer mangles: lone surrogates, NUL, separators, a BOM, noncharacters. */
const oddUnit = fc.constantFrom('\ud800', '\udbff', '\udc00', '\udfff', '\u0000', '\u2028', '\u2029', '\ufeff', '\uffff', '\ufffe', '\u001b', '\u007f', '"', '\\', '\n', 'é', '😀', '\u202e');
const oddText = fc.array(fc.oneof(oddUnit, fc.string({ maxLength: 3, unit: 'binary' }), fc.string({ maxLength: 3 })), { maxLength: 8 }).map((a) => a.join(''));

/** Raw JSON number text an id may be written as: its value is the id (an integer a JSON number holds exactly), or it is no id. */
const rawNumber = fc.oneof(
  fc.constantFrom('-0', '0.0', '-0.0', '1.0', '1E2', '1e+2', '5e0', '-7e1', '100e-2', '1e-400', '0e5', '1e400', '-1e400', '9007199254740991', '-9007199254740991', '9007199254740992', '9007199254740993', '-9007199254740993', '1.5', '123456789012345678901234567890', '4.2e1'),
  fc.integer({ min: -(2 ** 53 - 1), max: 2 ** 53 - 1 }).map(String),
  fc.bigInt({ min: 2n ** 53n, max: 2n ** 70n }).map((b) => b.toString()),
);
const isIdValue = (v: unknown): v is string | number => typeof v === 'string' || (typeof v === 'number' && Number.isSafeInteger(v));

const listMethod = fc.constantFrom('tools/list', 'prompts/list', 'resources/list');

export type FrameOf = (uid: string) => Frame;

/** The frames that fit every transport and era (HTTP headers are mirrored from the body as a client would). */
export function frames(era: Era): fc.Arbitrary<FrameOf> {
  const kinds: fc.Arbitrary<FrameOf>[] = [
    // An id written as odd number text: answered under its value, or, when no id, -32600 without one.
    fc.tuple(rawNumber, listMethod).map(([raw, method]) => () => {
      const v: unknown = JSON.parse(raw);
      const text = JSON.stringify(request(era, '\u0000ID', method)).replace('"\\u0000ID"', raw);
      const owed: Owed = isIdValue(v) ? { status: 200, ok: true, id: v } : { status: 400, code: -32600 };
      return { kind: 'number id', era, text, headers: eraHeaders(era, method), owed, rows: ROW };
    }),
    // A string id of odd code units (lone surrogates, NUL, U+2028…): echoed exactly, its row under it.
    fc.tuple(oddText, listMethod).map(([s, method]) => (uid) => {
      const rid = `${s}#${uid}`;
      return { kind: 'string id', era, text: JSON.stringify(request(era, rid, method)), headers: eraHeaders(era, method), owed: { status: 200, ok: true, id: rid }, rows: ROW, rowId: rid };
    }),
    // Duplicate keys: the last one counts (as JSON.parse, and every JS client, reads them).
    fc.tuple(fc.constantFrom('id', 'method', 'jsonrpc'), fc.boolean(), fc.constantFrom<unknown>(null, {}, [1], true, 1.5, 'nope/x', '1.0')).map(([key, junkFirst, junk]) => (uid) => {
      const o = request(era, `dup-${uid}`, 'tools/list');
      const body = JSON.stringify(o);
      const junkText = `${JSON.stringify(key)}:${JSON.stringify(junk)}`;
      const text = junkFirst ? `{${junkText},${body.slice(1)}` : `${body.slice(0, -1)},${junkText}}`;
      const read = JSON.parse(text) as Obj;
      const rid = read.id;
      let owed: Owed;
      let headers = eraHeaders(era, 'tools/list');
      if (key === 'id' && !isIdValue(rid)) owed = { status: 400, code: -32600 };
      else if (key === 'jsonrpc' && read.jsonrpc !== '2.0') owed = { status: 400, code: -32600, id: rid as string };
      else if (key === 'method' && read.method !== 'tools/list') {
        // Its header names the method the body ends with, as a client writing it would.
        headers = eraHeaders(era, String(read.method));
        owed = typeof read.method === 'string' ? { status: notFoundStatus(era), code: -32601, id: rid as string } : { status: 400, code: -32600, id: rid as string };
      } else owed = { status: 200, ok: true, id: rid as string };
      return { kind: `duplicate ${key}`, era, text, headers, owed, rows: ROW, rowId: rid === `dup-${uid}` ? rid : undefined };
    }),
    // Deep nesting in a call's arguments: within the bound (1,000 levels of params) it is served;
    // past it, -32602 with the id (a status the eras leave open: the hub says 400, a malformed request).
    fc.tuple(fc.oneof(fc.integer({ min: 1, max: 600 }), fc.integer({ min: 1_001, max: 9_000 })), fc.constantFrom(...ECHO_TOOLS)).map(([depth, tool]) => (uid) => {
      const rid = `deep-${uid}`;
      const args = `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;
      const text = JSON.stringify(request(era, rid, 'tools/call', { name: tool, arguments: { z: 0 } })).replace('{"z":0}', args);
      // arguments sits one level below params: `depth` objects put its innermost at depth `depth`.
      const owed: Owed = depth <= 1000 ? { status: 200, ok: true, id: rid } : { status: [200, 400], code: -32602, id: rid };
      return { kind: depth <= 1000 ? 'deep arguments' : 'too deep arguments', era, text, headers: eraHeaders(era, 'tools/call', tool), owed, rows: ROW, rowId: rid };
    }),
    // Deep nesting outside params (a member no one reads): served as if absent; as the id: no id.
    fc.tuple(fc.integer({ min: 1, max: 30_000 }), fc.boolean()).map(([depth, asId]) => (uid) => {
      const rid = `deepx-${uid}`;
      const nest = '['.repeat(depth) + ']'.repeat(depth);
      const o = request(era, asId ? '\u0000ID' : rid, 'tools/list');
      const text = asId ? JSON.stringify(o).replace('"\\u0000ID"', nest) : `${JSON.stringify(o).slice(0, -1)},"x":${nest}}`;
      const owed: Owed = asId ? { status: 400, code: -32600 } : { status: 200, ok: true, id: rid };
      return { kind: asId ? 'deep id' : 'deep extra member', era, text, headers: eraHeaders(era, 'tools/list'), owed, rows: ROW, rowId: asId ? undefined : rid };
    }),
    // A notification's method with an id is a request of a method no one serves: -32601 under its id.
    fc.constantFrom('notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/roots/list_changed', 'notifications/message', 'notifications/x').map((method) => (uid) => {
      const rid = `nid-${uid}`;
      return { kind: 'notification with id', era, text: JSON.stringify(request(era, rid, method, method === 'notifications/cancelled' ? { requestId: 'never-sent' } : {})), headers: eraHeaders(era, method), owed: { status: notFoundStatus(era), code: -32601, id: rid }, rows: ROW, rowId: rid };
    }),
    // A notification proper: never answered, no row.
    fc.tuple(fc.constantFrom('notifications/x', 'notifications/progress', 'notifications/roots/list_changed', 'notifications/cancelled'), fc.boolean()).map(([method, withParams]) => () => {
      const params: Obj = method === 'notifications/cancelled' ? { requestId: 'never-sent-id' } : method === 'notifications/progress' ? { progressToken: 'never-sent', progress: 1 } : {};
      if (era === 'modern' && withParams) params._meta = envelope();
      const o: Obj = { jsonrpc: '2.0', method, ...(withParams || method === 'notifications/cancelled' || method === 'notifications/progress' ? { params } : {}) };
      return { kind: 'notification', era, text: JSON.stringify(o), headers: eraHeaders(era, method), owed: { status: 202, none: true }, rows: 0 };
    }),
    // Methods of the other era: -32601 (404 for a modern client).
    (era === 'modern' ? fc.constantFrom('initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe', 'tasks/list', 'tasks/result') : fc.constantFrom('server/discover', 'subscriptions/listen', 'tasks/update')).map((method) => (uid) => {
      const rid = `era-${uid}`;
      const params: Obj = method === 'logging/setLevel' ? { level: 'info' } : method.startsWith('resources/') ? { uri: 'x://y' } : method === 'subscriptions/listen' ? { notifications: { toolsListChanged: true } } : {};
      return { kind: `other era ${method}`, era, text: JSON.stringify(request(era, rid, method, params)), headers: eraHeaders(era, method), owed: { status: notFoundStatus(era), code: -32601, id: rid }, rows: ROW, rowId: rid };
    }),
    // A string id up to tens of thousands of characters: echoed whole (its row keeps its start).
    fc.tuple(fc.integer({ min: 1_000, max: 40_000 }), oddText).map(([len, s]) => (uid) => {
      const rid = `${uid}:${s}${'i'.repeat(len)}`;
      return { kind: 'long id', era, text: JSON.stringify(request(era, rid, 'tools/list')), headers: eraHeaders(era, 'tools/list'), owed: { status: 200, ok: true, id: rid }, rows: ROW };
    }),
    // A tool or prompt name of odd code units: unknown, -32602 in-band, in either era. Over HTTP
    // a modern client mirrors it in Mcp-Name as the sentinel of its UTF-8, which a lone surrogate
    // has none of: there is no header to fix, and the name is still unknown.
    fc.tuple(oddText, fc.constantFrom('tools/call', 'prompts/get')).map(([s, method]) => (uid) => {
      const rid = `uname-${uid}`;
      const name = `${s}\u0000${uid}`;
      return { kind: 'unicode name', era, text: JSON.stringify(request(era, rid, method, { name, arguments: {} })), headers: eraHeaders(era, method, name), owed: { status: 200, code: -32602, id: rid }, rows: ROW, rowId: rid };
    }),
    // A method name of odd code units: -32601 under its id. Over modern HTTP no Mcp-Method can
    // carry one that is not visible ASCII (the spec gives it no sentinel): whatever the header
    // says, or none, the method is unknown.
    fc.tuple(oddText, fc.constantFrom('none', 'sentinel', 'ascii part')).map(([s, header]) => (uid) => {
      const rid = `umethod-${uid}`;
      const method = `x/${s}${uid}`;
      const plain = /^[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?$/.test(method);
      const headers = eraHeaders(era, plain ? method : header === 'none' ? DELETE : header === 'sentinel' ? sentinel(method) : method.replace(/[^\x21-\x7e]/g, ''));
      return { kind: 'unicode method', era, text: JSON.stringify(request(era, rid, method)), headers, owed: { status: notFoundStatus(era), code: -32601, id: rid }, rows: ROW, rowId: rid };
    }),
    // Arguments and a foreign `_meta` key of odd code units reach the upstream as they were sent.
    fc.tuple(oddText, oddText, fc.constantFrom(...ECHO_TOOLS)).map(([a, v, tool]) => (uid) => {
      const rid = `fwd-${uid}`;
      const check = (m: Msg): string | null => {
        const result = m.result as { structuredContent?: { args?: Obj; meta?: Obj }; content?: { text?: string }[] } | undefined;
        // A 2025-03-26 client gets no structuredContent (README, older legacy revisions): the tool's text holds its arguments.
        if (era === 'batches') return (JSON.parse(result?.content?.[0]?.text ?? '{}') as Obj).s === a ? null : `the text came back as ${JSON.stringify(result?.content)}, sent ${JSON.stringify(a)}`;
        const sc = result?.structuredContent;
        if (sc?.args?.s !== a) return `arguments.s came back as ${JSON.stringify(sc?.args?.s)}, sent ${JSON.stringify(a)}`;
        if (sc.meta?.['com.example/odd'] !== v) return `_meta came back as ${JSON.stringify(sc.meta?.['com.example/odd'])}, sent ${JSON.stringify(v)}`;
        return null;
      };
      return { kind: 'unicode forwarded', era, text: JSON.stringify(request(era, rid, 'tools/call', { name: tool, arguments: { s: a }, _meta: { 'com.example/odd': v } })), headers: eraHeaders(era, 'tools/call', tool), owed: { status: 200, ok: true, id: rid }, rows: ROW, rowId: rid, check };
    }),
  ];
  if (era === 'modern') {
    // A clientInfo of odd code units: served, and its row names the client as it named itself
    // (the database keeps text as UTF-8: a lone surrogate there is U+FFFD; only the request id is
    // kept in its JSON form, README's ledger section).
    kinds.push(
      fc.tuple(oddText, oddText).map(([name, version]) => (uid) => {
        const rid = `info-${uid}`;
        const clientName = `${name}${uid}`;
        const text = JSON.stringify(request(era, rid, 'tools/list', { _meta: { [INFO]: { name: clientName, version } } }));
        const rowCheck = (r: { clientName: string | null; clientVersion: string | null }): string | null =>
          r.clientName === clientName.toWellFormed() && r.clientVersion === version.toWellFormed() ? null : `row names ${JSON.stringify([r.clientName, r.clientVersion])}, sent ${JSON.stringify([clientName, version])}`;
        return { kind: 'client info', era, text, headers: eraHeaders(era, 'tools/list'), owed: { status: 200, ok: true, id: rid }, rows: ROW, rowId: rid, rowCheck };
      }),
    );
  }
  // A response a client sends: answers no question of the hub's. A modern client sends none (400,
  // -32600, no row: it is no request); a legacy one's is taken (202) and changes nothing; over stdio
  // nothing answers it (JSON-RPC never answers a response).
  kinds.push(
    fc.tuple(fc.constantFrom<unknown>('r', 7, null), fc.boolean()).map(([rid, isError]) => (uid) => {
      const o: Obj = { jsonrpc: '2.0', id: rid === 'r' ? `resp-${uid}` : rid, ...(isError ? { error: { code: -1, message: 'no' } } : { result: {} }) };
      const owed: Owed = era === 'modern' ? { status: 400, code: -32600 } : { status: 202, none: true };
      return { kind: 'client response', era, text: JSON.stringify(o), headers: eraHeaders(era, undefined), owed, stdioOwed: { none: true }, rows: 0 };
    }),
  );
  return fc.oneof(...kinds);
}

/** Frames about HTTP headers alone (a modern client's mirrored headers; media types in either era). */
export function headerFrames(era: Era): fc.Arbitrary<FrameOf> {
  const kinds: fc.Arbitrary<FrameOf>[] = [
    // Content-Type and Accept: 415 / 406 before the body is read (no id, a denied row), or served.
    fc.tuple(
      fc.constantFrom('application/json', 'APPLICATION/JSON', 'application/json; charset=utf-8', 'application/json;charset=UTF-8', 'text/plain', 'application/jsonx', 'application/json-seq', '', 'text/json', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'),
      fc.constantFrom('application/json, text/event-stream', '*/*', 'application/*', 'application/json', 'text/event-stream', 'text/html', 'application/json;q=0, text/event-stream', 'application/json;q=0, */*', '*/*;q=0', 'application/*;q=0.1', 'APPLICATION/JSON', 'text/*', ''),
    ).map(([ct, accept]) => (uid) => {
      const rid = `media-${uid}`;
      const headers = { ...eraHeaders(era, 'tools/list'), 'content-type': ct, accept };
      let owed: Owed;
      if (!isJson(ct)) owed = { status: 415, code: -32600 };
      else if (accept !== '' && !takesJson(accept)) owed = { status: 406, code: -32600 };
      else owed = { status: 200, ok: true, id: rid };
      return { kind: 'media types', era, text: JSON.stringify(request(era, rid, 'tools/list')), headers, owed, httpOnly: true, rows: ROW };
    }),
  ];
  // A call that sends progress, under any Accept that takes JSON: answered in a type the Accept
  // takes (RFC 9110 §12.5.1; a stream only where text/event-stream is named or let in, never
  // where q=0 refuses it), its progress only on a stream.
  kinds.push(
    fc
      .tuple(
        fc.constantFrom('application/json', 'application/json, text/event-stream', 'text/event-stream, application/json', '*/*', 'application/json, text/event-stream;q=0', 'application/json, text/*;q=0', 'application/*, text/event-stream', 'application/json;q=0.5, text/event-stream;q=0.9', 'application/json, */*;q=0.1', ''),
        fc.integer({ min: 0, max: 3 }),
        fc.constantFrom(...ECHO_TOOLS.map((t) => t.replace('echo', 'slow'))),
      )
      .map(([accept, steps, tool]) => (uid) => {
        const rid = `acc-${uid}`;
        const text = JSON.stringify(request(era, rid, 'tools/call', { name: tool, arguments: { steps, interval: 5 }, _meta: { progressToken: `p-${uid}` } }));
        const checkHeaders = (header: (name: string) => string | null): string | null => {
          const ct = header('content-type');
          const type = (ct ?? '').split(';')[0]!.trim().toLowerCase();
          if (type === 'application/json') return null;
          if (type === 'text/event-stream') return accept === '' || takes(accept, 'text/event-stream') ? null : `a stream to Accept: ${accept}`;
          return `Content-Type ${ct}`;
        };
        return { kind: 'progress under Accept', era, text, headers: { ...eraHeaders(era, 'tools/call', tool), accept }, owed: { status: 200, ok: true, id: rid }, httpOnly: true, rows: ROW, rowId: rid, checkHeaders };
      }),
  );
  if (era !== 'modern') {
    // A notification or a response on a session the hub does not know: 404 -32001, no id, no row (no request).
    kinds.push(
      fc.constantFrom({ jsonrpc: '2.0', method: 'notifications/x' }, { jsonrpc: '2.0', id: 'r', result: {} }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'never-sent' } }).map((o) => () => ({
        kind: 'no request, unknown session',
        era,
        text: JSON.stringify(o),
        headers: { ...eraHeaders(era, undefined), 'mcp-session-id': 'no-such-session' },
        owed: { status: 404, code: -32001 },
        httpOnly: true,
        rows: 0,
      })),
    );
    // The session and version headers of a legacy request: an unknown session is 404 -32001 (as
    // SDK 1.x), none 400, a version the hub does not speak 400 (digest §6.2), a modern version
    // with no `_meta` claim a modern request without its keys (-32602, 400); each under its id.
    kinds.push(
      fc.tuple(fc.constantFrom('unknown session', 'no session', 'bad version', 'modern version'), fc.stringMatching(/^[\x21-\x7e]{1,40}$/), fc.constantFrom('2024-01-01', 'x', '2025-11-25x', '1.0')).map(([how, sid, v]) => (uid) => {
        const rid = `sess-${uid}`;
        const headers = { ...eraHeaders(era, 'tools/list') };
        let owed: Owed;
        if (how === 'unknown session') {
          headers['mcp-session-id'] = `x${sid}`;
          owed = { status: 404, code: -32001, id: rid };
        } else if (how === 'no session') {
          headers['mcp-session-id'] = DELETE;
          owed = { status: 400, code: -32600, id: rid };
        } else if (how === 'bad version') {
          headers['mcp-protocol-version'] = v;
          owed = { status: 400, code: -32600, id: rid };
        } else {
          headers['mcp-protocol-version'] = MODERN;
          owed = { status: 400, code: -32602, id: rid };
        }
        return { kind: `legacy ${how}`, era, text: JSON.stringify(request(era, rid, 'tools/list')), headers, owed, httpOnly: true, rows: ROW, rowId: rid };
      }),
    );
  }
  if (era === 'modern') {
    const tool = fc.constantFrom(...ECHO_TOOLS);
    kinds.push(
      // A modern request with a legacy client's session or resumption header: served, the header
      // ignored, no session id made or echoed (digest §6.3).
      fc.tuple(fc.constantFrom('mcp-session-id', 'last-event-id'), fc.stringMatching(/^[\x21-\x7e]{1,40}$/)).map(([name, value]) => (uid) => {
        const rid = `ls-${uid}`;
        const checkHeaders = (header: (name: string) => string | null): string | null => (header('mcp-session-id') === null ? null : `Mcp-Session-Id ${header('mcp-session-id')} on a modern answer`);
        return { kind: `modern with ${name}`, era, text: JSON.stringify(request(era, rid, 'tools/list')), headers: { ...eraHeaders(era, 'tools/list'), [name]: value }, owed: { status: 200, ok: true, id: rid }, httpOnly: true, rows: ROW, rowId: rid, checkHeaders };
      }),
      // A notification whose headers say otherwise than its body: -32020, without an id, and no row (no request).
      fc.tuple(fc.constantFrom('notifications/cancelled', 'notifications/x'), fc.constantFrom('method', 'version')).map(([method, what]) => () => {
        const headers = { ...eraHeaders(era, method), ...(what === 'method' ? { 'mcp-method': 'tools/list' } : { 'mcp-protocol-version': '2099-01-01' }) };
        const text = JSON.stringify({ jsonrpc: '2.0', method, params: { ...(method === 'notifications/cancelled' ? { requestId: 'never-sent' } : {}), _meta: envelope() } });
        return { kind: `notification ${what} mismatch`, era, text, headers, owed: { status: 400, code: -32020 }, httpOnly: true, rows: 0 };
      }),
    );
    kinds.push(
      // Mcp-Method that is not the body's method: -32020.
      fc.tuple(fc.constantFrom('tools/list', 'tools/call'), fc.oneof(fc.constantFrom('Tools/List', 'tools/list ', 'tools/call', 'tools/list,tools/list', 'prompts/list', '=?base64?dG9vbHMvbGlzdA==?='), fc.stringMatching(/^[\x21-\x7e]{1,20}$/))).filter(([m, h]) => m !== h.trim()).map(([method, hm]) => (uid) => {
        const rid = `mm-${uid}`;
        const text = JSON.stringify(request(era, rid, method, method === 'tools/call' ? { name: 'qm__echo', arguments: {} } : {}));
        return { kind: 'Mcp-Method mismatch', era, text, headers: { ...eraHeaders(era, method, method === 'tools/call' ? 'qm__echo' : undefined), 'mcp-method': hm }, owed: { status: 400, code: -32020, id: rid }, httpOnly: true, rows: ROW, rowId: rid };
      }),
      // Mcp-Name: the name itself or its sentinel is served; another, a bad sentinel, or none is -32020.
      fc.tuple(tool, fc.constantFrom('plain', 'sentinel', 'other', 'other sentinel', 'upper sentinel', 'unpadded', 'not utf-8', 'missing', 'empty', 'spaced')).map(([name, how]) => (uid) => {
        const rid = `mn-${uid}`;
        const b64 = Buffer.from(name).toString('base64');
        const value: Record<string, string> = {
          plain: name,
          sentinel: sentinel(name),
          other: name === 'ql__echo' ? 'qm__echo' : 'ql__echo',
          'other sentinel': sentinel(`${name} `),
          'upper sentinel': `=?BASE64?${b64}?=`,
          unpadded: `=?base64?${b64.replace(/=+$/, '')}?=`,
          'not utf-8': `=?base64?${Buffer.from([0xff, 0xfe, 0x41]).toString('base64')}?=`,
          missing: DELETE,
          empty: '=?base64??=',
          spaced: `=?base64? ${b64}?=`,
        };
        const good = how === 'plain' || how === 'sentinel' || (how === 'unpadded' && b64 === b64.replace(/=+$/, ''));
        const headers = { ...eraHeaders(era, 'tools/call', name), 'mcp-name': value[how]! };
        const owed: Owed = good ? { status: 200, ok: true, id: rid } : { status: 400, code: -32020, id: rid };
        return { kind: `Mcp-Name ${how}`, era, text: JSON.stringify(request(era, rid, 'tools/call', { name, arguments: {} })), headers, owed, httpOnly: true, rows: ROW, rowId: rid };
      }),
      // MCP-Protocol-Version that is not the `_meta` version: -32020, whichever names a version the hub serves.
      fc.tuple(fc.constantFrom(MODERN, '2099-01-01', LEGACY), fc.constantFrom(MODERN, '2099-01-01', LEGACY, '2026-07-28x', '2026-7-28', 'x', '', ' 2026-07-28')).filter(([b, h]) => b !== h.trim() && !(h.trim() === '' && false)).map(([body, hv]) => (uid) => {
        const rid = `pv-${uid}`;
        const text = JSON.stringify(request(era, rid, 'tools/list', { _meta: { [PV]: body } }));
        return { kind: 'version mismatch', era, text, headers: { ...eraHeaders(era, 'tools/list'), 'mcp-protocol-version': hv }, owed: { status: 400, code: -32020, id: rid }, httpOnly: true, rows: ROW, rowId: rid };
      }),
    );
  }
  return fc.oneof(...kinds);
}

/** Batches: a 2025-03-26 session takes them (each member as if alone); any other client is refused -32600 (400), each request recorded. */
export function batchFrames(era: Era): fc.Arbitrary<FrameOf> {
  const member = fc.constantFrom('request', 'call', 'notification', 'response', 'bad id', 'fraction id', 'unknown method');
  return fc.array(member, { maxLength: 4 }).map((kinds) => (uid) => {
    const members: Obj[] = [];
    const owedMembers: Owed[] = [];
    let requests = 0;
    kinds.forEach((k, i) => {
      const rid = `b-${uid}-${i}`;
      if (k === 'request') {
        members.push(request(era, rid, 'tools/list'));
        owedMembers.push({ ok: true, id: rid });
        requests++;
      } else if (k === 'call') {
        members.push(request(era, rid, 'tools/call', { name: 'ql__echo', arguments: { i } }));
        owedMembers.push({ ok: true, id: rid });
        requests++;
      } else if (k === 'unknown method') {
        members.push(request(era, rid, 'nope/x'));
        owedMembers.push({ code: -32601, id: rid });
        requests++;
      } else if (k === 'bad id' || k === 'fraction id') {
        // No request (its id is of no allowed type): alone, or in a batch a session takes, it is
        // refused -32600 without an id, with an `(invalid)` row; in a batch refused whole it is
        // junk, which has no row (refusal-rows.ts), rather than a row under an id it does not have.
        members.push(request(era, k === 'bad id' ? { bad: rid } : i + 0.5, 'tools/list'));
        owedMembers.push({ code: -32600 });
        if (era === 'batches') requests++;
      } else if (k === 'notification') members.push({ jsonrpc: '2.0', method: 'notifications/x' });
      else members.push({ jsonrpc: '2.0', id: `resp-${rid}`, result: {} });
    });
    const text = JSON.stringify(members);
    // Refused whole: one row per request in it, or one (invalid) row when there is none (README).
    // Over stdio, a batch of notifications and responses alone has nothing of the modern era in it.
    const plain = members.length > 0 && kinds.every((k) => k === 'notification' || k === 'response');
    if (era !== 'batches' || members.length === 0)
      return { kind: 'batch refused', era, text, headers: eraHeaders(era, undefined), owed: { status: 400, code: -32600 }, stdioOwed: { code: -32600 }, rows: Math.max(1, requests), ...(plain ? { batchSessionOwed: { none: true } } : {}) };
    const owed: Owed = owedMembers.length === 0 ? { status: 202, none: true } : { status: 200, members: owedMembers };
    return { kind: 'batch', era, text, headers: eraHeaders(era, undefined), owed, rows: requests };
  });
}

/** `application/json` with or without parameters, any case (RFC 9110 §8.3.1). */
function isJson(ct: string): boolean {
  return /^application\/json\s*(;.*)?$/i.test(ct.trim());
}

/** Whether an Accept header takes application/json. */
const takesJson = (accept: string): boolean => takes(accept, 'application/json');

/** Whether an Accept header takes `type`: the most specific range naming it decides, q=0 refuses (RFC 9110 §12.5.1). */
function takes(accept: string, type: string): boolean {
  const family = `${type.split('/')[0]}/*`;
  let best = -1;
  let q = 0;
  for (const part of accept.split(',')) {
    const [range, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const s = range === type ? 2 : range === family ? 1 : range === '*/*' ? 0 : -1;
    if (s < best || s < 0) continue;
    const qp = params.find((p) => p.startsWith('q='));
    const w = qp ? Number(qp.slice(2)) : 1;
    q = s > best ? w : Math.max(q, w);
    best = s;
  }
  return best >= 0 && q > 0;
}

/** A JSON-RPC message the hub sent. */
export interface Msg {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  result?: unknown;
  error?: { code?: unknown; message?: unknown };
}

export const isFinal = (m: Msg): boolean => 'result' in m || 'error' in m;

/** Every message the hub may send is one of JSON-RPC's, its ids of MCP's types (never null: digest §1.1). */
export function wellFormed(m: unknown): string | null {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return 'not an object';
  const o = m as Msg;
  if (o.jsonrpc !== '2.0') return 'jsonrpc is not "2.0"';
  if (isFinal(o)) {
    if ('result' in o && 'error' in o) return 'both result and error';
    if (!(typeof o.id === 'string' || Number.isSafeInteger(o.id) || (o.id === undefined && 'error' in o))) return `id ${JSON.stringify(o.id)}`;
    if ('result' in o && (typeof o.result !== 'object' || o.result === null || Array.isArray(o.result))) return 'result is no object';
    if ('error' in o && (!Number.isInteger(o.error?.code) || typeof o.error?.message !== 'string')) return 'malformed error';
    if ('error' in o && o.error?.message === 'internal error') return 'the catch-all internal error';
    return null;
  }
  return typeof o.method === 'string' ? null : 'no method';
}

/** Why answer `m` is not what `owed` says, or null. */
export function answerProblem(owed: Owed, m: Msg | undefined): string | null {
  if (m === undefined) return 'no answer';
  const bad = wellFormed(m);
  if (bad) return bad;
  if (m.id !== owed.id) return `id ${JSON.stringify(m.id)}, owed ${JSON.stringify(owed.id)}`;
  if (owed.ok && !('result' in m)) return `error ${JSON.stringify(m.error)}, owed a result`;
  if (owed.code !== undefined && m.error?.code !== owed.code) return `${'result' in m ? 'a result' : `code ${String(m.error?.code)}`}, owed ${owed.code}`;
  return null;
}

export const statusOk = (owed: Owed, status: number): boolean => owed.status === undefined || (Array.isArray(owed.status) ? owed.status.includes(status) : owed.status === status);
