import { createServer, IncomingMessage, maxHeaderSize, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { credentialHeaders, type AuthOutcome, type Identity } from '../auth/authenticator.js';
import type { Logger } from '../log.js';
import type { EdgeGate, EdgeRefusal } from '../policy/gate.js';
import { INVALID_REQUEST, RpcError } from '../protocol/errors.js';
import { firstHeaderValue } from '../protocol/header-value.js';
import { arrayOf, batchOf, classify, errorResponse, memberBytes, parseFrame, type Classified } from '../protocol/jsonrpc.js';
import { acceptsType, namesType } from './accept.js';
import { looksModern, unsupportedLegacyVersion } from './classify.js';
import type { HubCore, MessageSink } from './core.js';
import type { Endpoint } from './endpoint.js';
import { NO_ROOM, NO_ROOM_HEADERS, noRoomError } from './session-table.js';
import { notOurs, primes, SessionStreams, type ResumableStream } from './resumable.js';
import { BodyEnds, type TooLarge } from './oversize-body.js';
import type { Exchange } from './exchange.js';
import { isStatusPageFile } from './admin.js';
import { hostAllowed, originAllowed, type OriginPolicy } from './origin.js';
import { fieldLines } from '../transport/http1/field-lines.js';
import { endAtExpiry } from './expiry.js';
import { MAX_UNREAD_BYTES, PostChannel, SseStream } from './sse.js';
import { Canceller } from '../cancel.js';
import { Http1Edge, timeoutCheckMs } from '../transport/http1/edge.js';
import { ConnectionTurns, MAX_WAITING } from './connection-turns.js';
import type { EdgeRequest, EdgeResponse } from '../transport/http1/types.js';
import { toOriginForm } from './request-target.js';
import { QUIET_TICK_MS, QuietAnswers } from './quiet-answers.js';
import { adminMaxConnections, ConnectionCap, defaultMaxConnections } from '../transport/connection-cap.js';
import { LogBudget } from '../log-budget.js';
import { monotonicNow } from '../monotonic.js';

export interface HttpOptions extends OriginPolicy {
  port: number;
  maxBodyBytes: number;
  /** Time a client has to send a request's head and body; default 66 s (node:http's headersTimeout). */
  requestTimeoutMs?: number;
  /** A tools/call quiet this long (up to twice) becomes an SSE stream; 0: never (quiet-answers.ts). */
  quietCallStreamMs?: number;
  /** Most connections open at once; unset: from the open-file limit (connection-cap.ts). */
  maxConnections?: number;
  /**
   * Other routes on this listener (admin, metrics), tried before /mcp; true when handled. With
   * authentication on, they are reached only with valid credentials, and get the caller.
   */
  routes?: (req: IncomingMessage, res: ServerResponse, path: string, who?: Identity) => boolean | Promise<boolean>;
  /** Authentication, tool scopes and rate limits; absent: everyone is anonymous and unlimited. */
  gate?: EdgeGate;
  /** Configured tool groups: `/mcp/<group>` serves only what the group shows. */
  groups?: { has(name: string): boolean; showsServer(name: string | undefined, server: string): boolean };
  /**
   * The admin listener (listen.admin): the operator routes, /metrics and /healthz, no MCP
   * endpoint, and a connection cap of its own (adminMaxConnections), never the MCP one.
   */
  adminOnly?: boolean;
  /** The main listener of a hub whose admin listener takes the operator routes alone (listen.admin.exclusive). */
  operatorRoutesElsewhere?: boolean;
}

const NOT_ON_ADMIN = 'Not Found: this is the admin listener (listen.admin); MCP clients use the address of listen.host and listen.port';
const ON_ADMIN_ONLY = 'Not Found: the operator routes are served on the admin listener only (listen.admin.exclusive)';

/** The operator's routes: the admin API, the status page and its live feed, /metrics (not /healthz). */
function isOperatorPath(path: string): boolean {
  return path === '/metrics' || path === '/admin' || path.startsWith('/admin/');
}

const FORBIDDEN_HOST = 'Forbidden: the Host header does not name this hub (off loopback, list the host clients use as an origin in listen.allowedOrigins)';
const FORBIDDEN_ORIGIN = 'Forbidden: Origin not allowed (listen.allowedOrigins lists the browser origins allowed besides loopback ones)';

const ANONYMOUS: Identity = { principal: 'anonymous', scopes: [], authContext: 'principal:anonymous', via: 'none' };

/** A message the edge refused (tool scopes, rate limit), with the JSON-RPC answer to send. */
type AdmitRefusal = EdgeRefusal & { answer: object };

/** `/mcp` serves everything; `/mcp/<group>` one configured tool group. */
const MCP_PATH = /^\/mcp(?:\/([A-Za-z0-9_-]{1,64}))?\/?$/;

/** Whether a request node:http read is for an MCP endpoint (its path, without the query). */
/**
 * A request target's path: what precedes its first '?', as `split('?', 1)[0]`, which went to the
 * runtime each request (~1.4k instructions a call under callgrind, docs/BENCHMARKS.md, seventieth session).
 */
function pathOf(url: string | undefined): string {
  if (url === undefined) return '/';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

const isMcpRequest = (req: IncomingMessage): boolean => MCP_PATH.test(pathOf(req.url));

/**
 * A header by a name known only at run time (Exchange.header): the modern POST's own names each
 * by its literal. The request path reads headers by their literal names,
 * `firstHeaderValue(req.headers['accept'])`, so that each load keeps feedback of its own; through
 * one keyed load here, every name went megamorphic (a stub-cache probe each, ~18 a request; issue #9).
 */
function header(req: EdgeRequest, name: string): string | undefined {
  const h = req.headers;
  switch (name) {
    case 'mcp-protocol-version':
      return firstHeaderValue(h['mcp-protocol-version']);
    case 'mcp-method':
      return firstHeaderValue(h['mcp-method']);
    case 'mcp-name':
      return firstHeaderValue(h['mcp-name']);
    case 'idempotency-key':
      return firstHeaderValue(h['idempotency-key']);
  }
  return firstHeaderValue(h[name]);
}

/** `application/json` in any case, with parameters (`; charset=utf-8`) or not; not a longer type that starts the same. */
function isJsonType(ct: string): boolean {
  const t = ct.trimStart();
  if (t.slice(0, 16).toLowerCase() !== 'application/json') return false;
  const next = t.charAt(16);
  return next === '' || next === ';' || next === ' ' || next === '\t';
}

/** A Content-Encoding that names no coding. */
function isIdentity(coding: string): boolean {
  const c = coding.trim().toLowerCase();
  return c === '' || c === 'identity';
}

const IDENTITY_ONLY: Readonly<Record<string, string>> = { 'accept-encoding': 'identity' };

function sendJson(res: EdgeResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const s = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
  res.end(s);
}

/** node:http's answers to requests llhttp could not read (_http_server.js, socketOnError). */
const CLIENT_ERROR_ANSWERS: Record<string, string> = {
  HPE_HEADER_OVERFLOW: 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n',
  ERR_HTTP_REQUEST_TIMEOUT: 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n',
  default: 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n',
};

/** A refusal answered once its row is written (`recorded`), or at once when there is no row to write. */
function afterRow(recorded: Promise<void> | undefined, answer: () => void): void | Promise<void> {
  return recorded ? recorded.then(answer) : answer();
}

/** `next` unless a route served the request (`served`: the operator routes' answer, a promise for some). */
function unlessServed(served: boolean | Promise<boolean>, next: () => void | Promise<void>): void | Promise<void> {
  if (served instanceof Promise) return served.then((yes) => (yes ? undefined : next()));
  return served ? undefined : next();
}

/** The client went away (or was cut off) before its body was whole: there is no one to answer. */
const GONE = Symbol('gone');

/**
 * Read a body up to `max` bytes; TooLarge when it is larger (the caller answers 413; its ends
 * are kept as it drains, oversize-body.ts), GONE when it never came whole.
 */
function readBody(req: IncomingMessage, max: number): Promise<Buffer | TooLarge | typeof GONE> {
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length']);
    let chunks: Buffer[] = [];
    let size = 0;
    let ends: BodyEnds | undefined;
    let drained: ((e: BodyEnds) => void) | undefined;
    const tooLarge = (): void => {
      ends = new BodyEnds();
      for (const c of chunks) ends.add(c);
      chunks = [];
      resolve({ ends: new Promise((r) => (drained = r)) });
    };
    // Refused at once, its body drained as it comes (only its ends kept).
    if (Number.isFinite(declared) && declared > max) tooLarge();
    req.on('data', (c: Buffer) => {
      if (ends) return ends.add(c);
      size += c.length;
      chunks.push(c);
      if (size > max) tooLarge();
    });
    req.on('end', () => (ends ? drained?.(ends) : resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks))));
    // 'aborted': the connection closed mid-body (the client left, or node:http cut it at the
    // request timeout). Not a failure of the hub: rejecting made each one an error line.
    // An oversize body cut short still has its head, which may say which question it answers.
    req.on('error', () => (ends ? drained?.(ends) : resolve(GONE)));
    // A connection node:http closes once the 413 is sent may end the body with neither.
    req.on('close', () => ends && drained?.(ends));
  });
}

/**
 * The Streamable HTTP listener: POST/GET/DELETE on /mcp, /healthz, and the checks every
 * request passes first (Host, Origin, size, content type).
 */
export class HttpServer {
  /** node:http: admin pages, GET streams, upgrades, and anything the fast path hands over. */
  readonly server: Server;
  private readonly edge: Http1Edge;
  /** node:http's requests, one at a time per connection as on the fast path. */
  private readonly turns = new ConnectionTurns<IncomingMessage, ServerResponse>(
    (req, res) => this.serve(req, res),
    (req, res) => this.refuseWaiting(req, res),
    (req) => this.readWhileWaiting(req),
  );
  /** Bodies of MCP POSTs read while they wait for their turn (node:http would buffer them whole). */
  private readonly readEarly = new WeakMap<IncomingMessage, Promise<Buffer | TooLarge | typeof GONE>>();
  /** Calls still quiet after a few seconds become streams (quiet-answers.ts). */
  private readonly quietAnswers: QuietAnswers | undefined;

  constructor(
    private readonly endpoint: Endpoint,
    private readonly core: HubCore,
    private readonly opts: HttpOptions,
    private readonly log: Logger,
  ) {
    const requestTimeoutMs = opts.requestTimeoutMs ?? 66_000;
    const quietMs = opts.quietCallStreamMs ?? QUIET_TICK_MS;
    this.quietAnswers = quietMs > 0 ? new QuietAnswers(quietMs) : undefined;
    // node:http checks its timeouts every 30 s by default: a request would be cut up to 30 s late.
    this.server = createServer({ connectionsCheckingInterval: timeoutCheckMs(requestTimeoutMs) }, (req, res) => {
      toOriginForm(req);
      this.turns.take(req, res);
    });
    this.server.keepAliveTimeout = 65_000;
    // The head and the body under one limit on both readers: node:http's own requestTimeout
    // (300 s) would let a trickled body hold a connection five times as long as the fast path.
    this.server.headersTimeout = requestTimeoutMs;
    this.server.requestTimeout = requestTimeoutMs;
    this.server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => this.clientError(err, socket));
    const max = opts.adminOnly ? adminMaxConnections() : (opts.maxConnections ?? defaultMaxConnections());
    const setting = opts.adminOnly ? 'listen.admin, a cap of its own' : 'listen.maxConnections';
    const said = new LogBudget(1, 60_000);
    const cap =
      max === undefined
        ? undefined
        : new ConnectionCap(
            max,
            () => {
              const line = said.take();
              if (line) this.log.warn({ maxConnections: max, leftOut: line.skipped || undefined }, `a client connection was refused (503) as it arrived: ${max} are open (${setting})`);
            },
            setting,
          );
    this.edge = new Http1Edge(this.server, (req, res) => this.serve(req, res, req.body), {
      cap,
      // The admin listener has no MCP endpoint: everything goes to node:http, which refuses those paths.
      wants: (path) => !opts.adminOnly && MCP_PATH.test(path),
      maxBodyBytes: opts.maxBodyBytes,
      maxHeadBytes: maxHeaderSize,
      keepAliveMs: this.server.keepAliveTimeout,
      requestTimeoutMs: this.server.headersTimeout,
    });
  }

  private serve(req: EdgeRequest, res: EdgeResponse, body?: Buffer): void {
    let routed: void | Promise<void>;
    try {
      routed = this.route(req, res, body);
    } catch (err) {
      return this.failed(res, err);
    }
    routed?.catch((err: unknown) => this.failed(res, err));
  }

  private failed(res: EdgeResponse, err: unknown): void {
    this.log.error({ err }, 'request handler failed');
    if (!res.headersSent) sendJson(res, 500, errorResponse(undefined, new RpcError(-32603, 'internal error')));
    else res.end();
  }

  /**
   * node:http's answer to what llhttp could not read, given once the requests read before it are
   * answered. node:http's default wrote it at once over the answer still to come (and destroyed
   * the connection), so a call that had run lost its answer: after a request with
   * `Connection: close` any byte is such an error, and bytes that cannot begin a request (a body
   * longer than its Content-Length said) are too. The fast path answers those requests, then
   * hands what follows over. After `Connection: close` nothing more is sent (RFC 9112 §9.6):
   * node:http closes the connection after that answer.
   */
  private clientError(err: Error & { code?: string }, socket: Duplex): void {
    if (err.code === 'HPE_CLOSED_CONNECTION') return; // node:http ends the connection after that request's answer
    if (!err.code?.startsWith('HPE_') && err.code !== 'ERR_HTTP_REQUEST_TIMEOUT') return void socket.destroy(err); // the connection failed: nobody to answer
    this.turns.whenIdle(socket, () => {
      if (socket.writable) socket.write(CLIENT_ERROR_ANSWERS[err.code!] ?? CLIENT_ERROR_ANSWERS.default);
      socket.destroy(err);
    });
  }

  /** A request that waits for its turn has its body read now, within maxBodyBytes. */
  private readWhileWaiting(req: IncomingMessage): void {
    if (req.method === 'POST' && isMcpRequest(req)) this.readEarly.set(req, readBody(req, this.opts.maxBodyBytes));
  }

  /** One request too many waiting on its connection: refused at once, and recorded as an edge refusal is. */
  private refuseWaiting(req: IncomingMessage, res: ServerResponse): void {
    const message = `Too Many Requests: more than ${MAX_WAITING} requests wait on this connection; send them on other connections or wait for the answers`;
    const gate = this.opts.gate;
    const recorded = async (): Promise<void> => {
      if (!gate || !isMcpRequest(req)) return;
      const who = await gate.auth.authenticate(credentialHeaders(req));
      await gate.refusedUnread({ ...this.unreadFacts(req), principal: who.principal, status: 429, message });
    };
    // Answered whether or not its row could be written (a failure is logged).
    recorded()
      .catch((err: unknown) => this.log.error({ err }, 'recording a refused request failed'))
      .then(() => sendJson(res, 429, errorResponse(undefined, new RpcError(INVALID_REQUEST, message)), { 'retry-after': '1' }))
      .catch((err: unknown) => this.log.error({ err }, 'refusing a request failed'));
  }

  listen(host: string, port: number): Promise<AddressInfo> {
    return this.edge.listen(host, port);
  }

  /** Listen on a unix socket at `path` (the admin listener's `listen.admin.path`). */
  listenPath(path: string): Promise<AddressInfo | string> {
    return this.edge.listenOn({ path });
  }

  /** Take no new connections or requests; connections close once their answer is out. */
  stopAccepting(): void {
    this.edge.stopAccepting();
  }

  close(): Promise<void> {
    return this.edge.close();
  }

  /**
   * `body`: already read by the fast path; otherwise read here. Not async, nor the stages after
   * it: a request that waits for nothing (the usual POST, its credential checked at once) is the
   * endpoint's own promise, where each async stage awaiting the next would resume a turn after
   * the answer, for nothing. What waits (a refusal's row, an OAuth token's check, the operator
   * routes) is a promise to which the next stage is chained.
   */
  private route(req: EdgeRequest, res: EdgeResponse, body?: Buffer): void | Promise<void> {
    const path = pathOf(req.url);
    // node:http keeps the first of two Host lines; a proxy in front may route by the last, so the
    // two would read one request two ways: refused, as RFC 9112 §3.2 says a server must.
    if ((fieldLines(req.rawHeaders, 'host')?.length ?? 1) > 1) {
      const message = 'Bad Request: more than one Host header line';
      const recorded = MCP_PATH.test(path) ? this.opts.gate?.refusedUnread({ ...this.unreadFacts(req), status: 400, message }) : undefined;
      return afterRow(recorded, () => sendJson(res, 400, errorResponse(undefined, new RpcError(INVALID_REQUEST, message))));
    }
    const hostOk = hostAllowed(firstHeaderValue(req.headers['host']), this.opts);
    if (!hostOk || !originAllowed(firstHeaderValue(req.headers['origin']), this.opts)) {
      // Which one, and where it is allowed: a hub bound off loopback meets its own clients here
      // first (reached by an address or name not listed), and a bare 403 would not say why.
      const message = hostOk ? FORBIDDEN_ORIGIN : FORBIDDEN_HOST;
      // A DNS-rebinding or cross-site attempt leaves its row (rate-limited per address, as unauthenticated ones are).
      const recorded = MCP_PATH.test(path) ? this.opts.gate?.refusedUnread({ ...this.unreadFacts(req), status: 403, message }) : undefined;
      return afterRow(recorded, () => sendJson(res, 403, errorResponse(undefined, new RpcError(INVALID_REQUEST, message))));
    }
    if (this.cors(req, res, path)) return;
    const gate = this.opts.gate;
    if (path.startsWith('/.well-known/oauth-protected-resource') && req.method === 'GET') {
      const doc = gate?.auth.metadataFor(path, (g) => this.opts.groups?.has(g) ?? false);
      return doc ? sendJson(res, 200, doc, { 'cache-control': 'max-age=300' }) : sendJson(res, 404, { error: 'not found' });
    }
    // The status page's static files need no credential (admin.ts, isStatusPageFile); what
    // they show comes from routes that do.
    const elsewhere = this.opts.operatorRoutesElsewhere === true && isOperatorPath(path);
    if (!elsewhere && this.opts.routes && req instanceof IncomingMessage && isStatusPageFile(path, req.method)) {
      return unlessServed(this.opts.routes(req, res as ServerResponse, path, ANONYMOUS), () => this.authenticated(req, res, path, elsewhere, body));
    }
    return this.authenticated(req, res, path, elsewhere, body);
  }

  private authenticated(req: EdgeRequest, res: EdgeResponse, path: string, elsewhere: boolean, body: Buffer | undefined): void | Promise<void> {
    const m = MCP_PATH.exec(path);
    const gate = this.opts.gate;
    // A challenge names the resource of the endpoint asked (its group's, with group resources).
    // Waited for only when it is a promise (an OAuth token's check): no turn for the usual request.
    const authed = gate ? gate.auth.authenticate(credentialHeaders(req), m?.[1]) : ({ ok: true, ...ANONYMOUS } as const);
    return authed instanceof Promise ? authed.then((who) => this.routeFor(req, res, path, m, elsewhere, who, body)) : this.routeFor(req, res, path, m, elsewhere, authed, body);
  }

  /** The rest of route(), once the caller is known (or known to be refused). */
  private routeFor(req: EdgeRequest, res: EdgeResponse, path: string, m: RegExpExecArray | null, elsewhere: boolean, who: AuthOutcome, body: Buffer | undefined): void | Promise<void> {
    const gate = this.opts.gate;
    if (path === '/healthz') {
      // A monitor set to the wrong method is told so, as by /metrics, not that nothing is here.
      if (req.method !== 'GET' && req.method !== 'HEAD') return void res.writeHead(405, { allow: 'GET, HEAD' }).end();
      // Server ids and states are for clients that may use them; a load balancer needs only the
      // status, and the code: 503 while the hub would not serve a call (stopping, or refusing).
      const groups = who.ok ? who.groups : undefined;
      const h = this.core.health(groups && ((id) => [...groups].some((g) => this.opts.groups?.showsServer(g, id) === true)), groups);
      return sendJson(res, h.status === 'ok' ? 200 : 503, who.ok ? h : { status: h.status });
    }
    if (!who.ok) {
      this.log.debug({ path, status: who.status, reason: who.message, clientAddress: req.socket.remoteAddress }, 'request refused: not authenticated');
      const recorded = MCP_PATH.test(path) ? gate?.refusedUnread({ ...this.unreadFacts(req), principal: who.principal, status: who.status, message: who.message }) : undefined;
      return afterRow(recorded, () => sendJson(res, who.status, errorResponse(undefined, new RpcError(INVALID_REQUEST, who.message)), who.headers));
    }
    // Where the MCP endpoint or the operator routes went is told only past the Host and Origin
    // checks (a DNS-rebinding page is refused as anywhere else) and to a caller who may use
    // them: an authenticated client here, an admin for the operator routes (below).
    if (this.opts.adminOnly && m) return sendJson(res, 404, { error: NOT_ON_ADMIN });
    // A key limited to some groups' endpoints (auth.apiKeys[].groups), or a token issued for group
    // resources alone, uses those alone: the other endpoints, and the operator routes, show what
    // its groups do not.
    if (who.groups && !(m && m[1] !== undefined && who.groups.has(m[1]))) {
      const message = `Forbidden: this ${who.via === 'oauth' ? 'token' : 'API key'} may use only ${[...who.groups].map((g) => `/mcp/${g}`).join(', ')}`;
      const recorded = m ? this.opts.gate?.refusedUnread({ ...this.unreadFacts(req), principal: who.principal, status: 403, message }) : undefined;
      return afterRow(recorded, () => sendJson(res, 403, m ? errorResponse(undefined, new RpcError(INVALID_REQUEST, message)) : { error: message }));
    }
    if (gate && isOperatorPath(path)) {
      // The operator routes read everyone's ledger rows: with authentication on, only an admin may.
      const refused = gate.auth.checkAdmin(who);
      if (refused) return sendJson(res, refused.status, { error: refused.message }, refused.headers);
    }
    if (elsewhere) return sendJson(res, 404, { error: ON_ADMIN_ONLY });
    // The fast path takes MCP paths only, so the other routes always come through node:http.
    if (this.opts.routes && req instanceof IncomingMessage) return unlessServed(this.opts.routes(req, res as ServerResponse, path, who), () => this.mcp(req, res, m, who, body));
    return this.mcp(req, res, m, who, body);
  }

  /** An MCP endpoint's request (`m`: the path's match, null for any other path), from a caller let in. */
  private mcp(req: EdgeRequest, res: EdgeResponse, m: RegExpExecArray | null, who: Identity, body: Buffer | undefined): void | Promise<void> {
    if (!m) return sendJson(res, 404, { error: 'not found' });
    const group = m[1];
    if (group !== undefined && !this.opts.groups?.has(group)) {
      const message = `Not Found: no tool group named "${group}"`;
      return afterRow(this.opts.gate?.refusedUnread({ ...this.unreadFacts(req), principal: who.principal, status: 404, message }), () =>
        sendJson(res, 404, errorResponse(undefined, new RpcError(INVALID_REQUEST, message))),
      );
    }
    switch (req.method) {
      case 'POST':
        return this.post(req, res, who, group, body);
      case 'GET':
        return this.getStream(req, res, who, group);
      case 'DELETE':
        return this.deleteSession(req, res, who, group);
      default:
        res.writeHead(405, { allow: 'GET, POST, DELETE' }).end();
    }
  }

  private post(req: EdgeRequest, res: EdgeResponse, who: Identity, group: string | undefined, read: Buffer | undefined): void | Promise<void> {
    const ct = firstHeaderValue(req.headers['content-type']) ?? '';
    if (!isJsonType(ct)) return this.refuseUnread(req, res, who, 415, 'Unsupported Media Type: Content-Type must be application/json');
    // Listing both types is the client's MUST (both revisions); RFC 9110 §12.5.1 lets a server
    // disregard Accept. A client that takes JSON is served (curl's */*, none, application/json
    // alone: its answer stays plain JSON). One that refuses JSON refuses every answer the hub may
    // give it, its errors included: 406, as SDK 1.x servers answer it, rather than a type it said
    // it cannot read.
    const accept = firstHeaderValue(req.headers['accept']);
    if (accept !== undefined && accept !== '' && !acceptsType(accept, 'application/json'))
      return this.refuseUnread(req, res, who, 406, 'Not Acceptable: the Accept header must take application/json (a client lists application/json and text/event-stream)');
    // A compressed body is refused, not read as JSON (a parse error, or worse, a plain body that
    // claims a coding served as if it had none): RFC 9110 §15.5.16's 415 with the codings taken.
    // Decoding would put a decompression bomb within any client's reach, for bodies that small.
    const coding = firstHeaderValue(req.headers['content-encoding']);
    if (coding !== undefined && !isIdentity(coding)) {
      return this.refuseUnread(req, res, who, 415, 'Unsupported Media Type: the hub takes request bodies uncompressed (no Content-Encoding)', IDENTITY_ONLY);
    }
    if (read !== undefined || !(req instanceof IncomingMessage)) return this.postBody(req, res, who, group, read ?? null);
    return (this.readEarly.get(req) ?? readBody(req, this.opts.maxBodyBytes)).then((body) => this.postBody(req, res, who, group, body));
  }

  private postBody(req: EdgeRequest, res: EdgeResponse, who: Identity, group: string | undefined, body: Buffer | TooLarge | typeof GONE | null): void | Promise<void> {
    // As the fast path drops a request whose body never came whole: nothing ran, nothing to record.
    if (body === GONE) return this.log.debug({ clientAddress: req.socket.remoteAddress }, 'request dropped: the connection closed before its body was whole');
    if (body === null || !Buffer.isBuffer(body)) {
      // A legacy client's answer to a question the hub asked: the question fails once the body has drained.
      const sid = firstHeaderValue(req.headers['mcp-session-id']);
      if (body !== null && sid !== undefined) void body.ends.then((ends) => this.endpoint.answerTooLarge(sid, who.principal, group, ends, this.opts.maxBodyBytes));
      return this.refuseUnread(req, res, who, 413, `Payload Too Large: the limit is ${this.opts.maxBodyBytes} bytes`);
    }
    const decoded = body.toString('utf8');
    // A parser may ignore a byte order mark (RFC 8259 §8.1), and Windows tools write one.
    const text = decoded.charCodeAt(0) === 0xfeff ? decoded.slice(1) : decoded;
    const batch = batchOf(text);
    let c: Classified | undefined;
    const session = batch && this.endpoint.batchSession(firstHeaderValue(req.headers['mcp-session-id']), who.principal, group, who.key);
    if (batch && session === 'takes') {
      const refused = this.endpoint.batchRefusal(batch, firstHeaderValue(req.headers['mcp-protocol-version']), firstHeaderValue(req.headers['idempotency-key']));
      if (!refused) return this.postBatch(req, res, who, group, batch, body.length);
      c = { kind: 'invalid', error: refused, members: batch };
    }
    // Not even JSON is still a message that reached the hub: the endpoint answers and records it.
    // A batch no session takes is refused whole, each of its requests recorded.
    c ??= parseFrame(text);
    if (batch && c.kind === 'invalid' && c.members === undefined) c = { ...c, members: batch };
    const message = c;
    const admitted = this.admit(req, who, group, message, body.length);
    return admitted instanceof Promise
      ? admitted.then((refused) => this.postAdmitted(req, res, who, group, message, session === 'gone', body.length, refused))
      : this.postAdmitted(req, res, who, group, message, session === 'gone', body.length, admitted);
  }

  /** `gone`: a batch on a session that has ended (the endpoint answers it as such). */
  private postAdmitted(req: EdgeRequest, res: EdgeResponse, who: Identity, group: string | undefined, c: Classified, gone: boolean, bytes: number, refused: AdmitRefusal | null): void | Promise<void> {
    if (refused) return sendJson(res, refused.status, refused.answer, refused.headers);
    const { channel, closed } = this.answerChannel(req, res);
    // A call may run for minutes; other requests' answers carry headers fixed at their end (a session id).
    if (c.kind === 'request' && c.msg.method === 'tools/call') this.watchQuiet(req, channel);
    const ex = this.exchange(req, who, group, bytes, closed, channel, (msg, status, headers) => channel.end(msg, status, headers), () => new SseStream(res));
    if (gone) return this.endpoint.batchWithoutSession(c.kind === 'invalid' ? (c.members ?? []) : [], ex);
    return this.endpoint.message(c, ex);
  }

  /**
   * A call still quiet after a few seconds becomes a stream (quiet-answers.ts), for a client
   * whose Accept names text/event-stream: one that only puts up with any type (`curl`'s
   * default, or no Accept at all) asked for JSON, and would get a stream for its slow calls alone.
   */
  private watchQuiet(req: EdgeRequest, channel: PostChannel): void {
    if (this.quietAnswers && namesType(firstHeaderValue(req.headers['accept']) ?? '', 'text/event-stream')) channel.watchQuiet(this.quietAnswers);
  }

  /** The edge's admission of one message (tool scopes, rate limit): a refusal to send, or null. */
  private admit(req: EdgeRequest, who: Identity, group: string | undefined, c: Classified, requestBytes: number): AdmitRefusal | null | Promise<AdmitRefusal | null> {
    // A response, well formed or not, answers the hub's own question: never refused as a request.
    if ((c.kind !== 'request' && c.kind !== 'invalid') || (c.kind === 'invalid' && c.response) || !this.opts.gate) return null;
    // A malformed message's row names what its own would (its id, method, and the era its `_meta` says), as over stdio.
    const refused = this.opts.gate.admit(who, c.kind === 'request' ? c.msg : undefined, { clientAddress: req.socket.remoteAddress, requestBytes, group, traceparent: firstHeaderValue(req.headers['traceparent']), headers: req.headers, malformed: c.kind === 'invalid' ? c : undefined });
    // A refusal is a promise (its row is written first), and so is a call whose renamed tool's base
    // name is looked up (EdgeGate.renamedBase); any other request let in waits no turn here.
    if (refused === null) return null;
    // Under the id it came with, a malformed message's too, as its own answer would be: its client matches it by that.
    const answered = (r: EdgeRefusal | null): AdmitRefusal | null => r && { ...r, answer: errorResponse(c.kind === 'request' ? c.msg.id : c.kind === 'invalid' ? c.id : undefined, new RpcError(INVALID_REQUEST, r.message)) };
    return refused instanceof Promise ? refused.then(answered) : answered(refused);
  }

  /** Where a POST's answer goes (JSON, or SSE once something streams), and the signal of its client going away. */
  private answerChannel(req: EdgeRequest, res: EdgeResponse): { channel: PostChannel; closed: Canceller } {
    const accept = firstHeaderValue(req.headers['accept']) ?? '';
    const channel = new PostChannel(res, req.socket, accept === '' || acceptsType(accept, 'text/event-stream'));
    const closed = new Canceller();
    res.on('close', () => {
      if (!res.writableFinished) closed.abort();
      if (channel.dropped > 0) {
        this.log.warn({ dropped: channel.dropped, clientAddress: req.socket.remoteAddress }, `answer stream: progress and log notifications left out while the client was more than ${MAX_UNREAD_BYTES} bytes behind`);
      }
    });
    return { channel, closed };
  }

  private exchange(req: EdgeRequest, who: Identity, group: string | undefined, requestBytes: number, closed: Canceller, sink: MessageSink, reply: Exchange['reply'], stream?: Exchange['stream']): Exchange {
    return {
      transport: 'http',
      header: (n) => header(req, n),
      clientAddress: req.socket.remoteAddress,
      connection: req.socket,
      // Only the credential names the principal; nothing in the body or its _meta can.
      principal: who.principal,
      authContext: who.authContext,
      credentialExpiresAt: who.expiresAt,
      credentialLapse: who.lapse,
      credentialKey: who.key,
      credentialKeysAt: who.keysAt,
      group,
      requestBytes,
      sink,
      reply,
      closed: closed.signal,
      stream,
    };
  }

  /**
   * A JSON-RPC batch on a session negotiated at 2025-03-26, the one revision that has them (its
   * receivers MUST take them; digest §1.1). Each member is handled as a message of its own (its
   * admission, its ledger row) and their answers leave together: one JSON array, or, once a
   * member streams (progress, a question to the client), events on one SSE stream. A batch of
   * notifications and responses only gets 202. Members run concurrently, as JSON-RPC allows.
   */
  private async postBatch(req: EdgeRequest, res: EdgeResponse, who: Identity, group: string | undefined, batch: unknown[], batchBytes: number): Promise<void> {
    const { channel, closed } = this.answerChannel(req, res);
    // Its answers leave together, so one slow call keeps the whole batch's answer quiet.
    if (batch.some(isToolCall)) this.watchQuiet(req, channel);
    const answers = new BatchAnswers(channel, batch.length);
    const sink: MessageSink = {
      send: (msg) => answers.send(msg),
      get closed() {
        return channel.closed;
      },
      canStream: channel.canStream,
    };
    const admitted = (c: Classified, requestBytes: number, refused: AdmitRefusal | null): void | Promise<void> =>
      refused ? answers.reply(refused.answer, refused) : this.endpoint.message(c, this.exchange(req, who, group, requestBytes, closed, sink, (msg) => answers.reply(msg)));
    // A member let in goes on in this turn, as postBody's message does: only a refusal (its row written first) is waited for.
    await Promise.all(
      batch.map((member) => {
        // A member that throws fails alone, as in the async callback this was: the others still run.
        try {
          const c = classify(member);
          const requestBytes = memberBytes(member, batchBytes);
          const refused = this.admit(req, who, group, c, requestBytes);
          return refused instanceof Promise ? refused.then((r) => admitted(c, requestBytes, r)) : admitted(c, requestBytes, refused);
        } catch (err) {
          return Promise.reject(err);
        }
      }),
    );
  }

  /**
   * CORS for the origins listed in `listen.allowedOrigins` (never for the loopback origins
   * allowed by default: any local web page would reach an unauthenticated hub). Answers a
   * preflight of an MCP path itself (true); otherwise marks the answer readable by that origin.
   * The preflight carries no credential: the request it announces is authenticated as usual.
   */
  private cors(req: EdgeRequest, res: EdgeResponse, path: string): boolean {
    if (this.opts.allowedOrigins.length === 0) return false;
    // Every answer may differ by Origin once some origin gets CORS: a cache must keep them apart.
    res.setHeader('vary', 'Origin');
    const origin = firstHeaderValue(req.headers['origin']);
    if (origin === undefined || !this.opts.allowedOrigins.includes(origin)) return false;
    res.setHeader('access-control-allow-origin', origin);
    // The admin listener has no MCP endpoint: its preflight too goes on to the 404.
    const m = req.method === 'OPTIONS' && !this.opts.adminOnly ? MCP_PATH.exec(path) : null;
    // A preflight of a group that does not exist goes on to the 404 a POST there gets: a 204
    // would tell a browser app the endpoint is there.
    if (!m || (m[1] !== undefined && !this.opts.groups?.has(m[1]))) {
      res.setHeader('access-control-expose-headers', 'Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate');
      return false;
    }
    const asked = firstHeaderValue(req.headers['access-control-request-headers']);
    res.writeHead(204, {
      'access-control-allow-methods': 'GET, POST, DELETE',
      // Whatever it announces (Mcp-Param-* names vary by tool), if it is a list of header names.
      ...(asked && /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+(\s*,\s*[!#$%&'*+\-.^_`|~0-9A-Za-z]+)*$/.test(asked.trim()) ? { 'access-control-allow-headers': asked.trim() } : {}),
      'access-control-max-age': '600',
      'content-length': '0',
    });
    res.end();
    return true;
  }

  /** An authenticated request refused before its body was parsed: recorded, then answered. */
  private async refuseUnread(req: EdgeRequest, res: EdgeResponse, who: Identity, status: 406 | 413 | 415, message: string, headers?: Record<string, string>): Promise<void> {
    await this.opts.gate?.refusedUnread({ ...this.unreadFacts(req), principal: who.principal, status, message });
    sendJson(res, status, errorResponse(undefined, new RpcError(INVALID_REQUEST, message)), headers);
  }

  private unreadFacts(req: EdgeRequest): { header: (n: string) => string | undefined; clientAddress?: string; requestBytes?: number; group?: string } {
    const length = Number(firstHeaderValue(req.headers['content-length']));
    return { header: (n) => header(req, n), clientAddress: req.socket.remoteAddress, requestBytes: Number.isSafeInteger(length) && length >= 0 ? length : undefined, group: this.groupOf(req) };
  }

  /**
   * The configured tool group whose endpoint a refused request was sent to, for its row: a path
   * naming no configured group names no group (its 404's message quotes what it asked for).
   */
  private groupOf(req: EdgeRequest): string | undefined {
    const g = MCP_PATH.exec(pathOf(req.url))?.[1];
    return g !== undefined && this.opts.groups?.has(g) ? g : undefined;
  }

  private getStream(req: EdgeRequest, res: EdgeResponse, who: Identity, group: string | undefined): void {
    // Modern clients have no GET stream (digest §6.3); legacy ones get their session's stream.
    if (looksModern(firstHeaderValue(req.headers['mcp-protocol-version']))) {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    if (!acceptsType(firstHeaderValue(req.headers['accept']) ?? '', 'text/event-stream')) {
      sendJson(res, 406, errorResponse(undefined, new RpcError(INVALID_REQUEST, 'Not Acceptable: GET needs Accept: text/event-stream')));
      return;
    }
    const unsupported = unsupportedLegacyVersion(firstHeaderValue(req.headers['mcp-protocol-version']));
    if (unsupported) {
      sendJson(res, 400, errorResponse(undefined, unsupported));
      return;
    }
    const sid = firstHeaderValue(req.headers['mcp-session-id']);
    const found = sid === undefined ? undefined : this.endpoint.sessionFor(sid, who.principal, group, who.key);
    if (found === NO_ROOM) {
      sendJson(res, 503, errorResponse(undefined, noRoomError()), NO_ROOM_HEADERS);
      return;
    }
    // A session id is not a credential: another principal's session is "not found".
    const session = found?.principal === who.principal ? found : undefined;
    if (!session) {
      sendJson(res, sid === undefined ? 400 : 404, errorResponse(undefined, new RpcError(sid === undefined ? INVALID_REQUEST : -32001, sid === undefined ? 'Mcp-Session-Id header is required' : 'Session not found')));
      return;
    }
    const lastEventId = firstHeaderValue(req.headers['last-event-id']);
    // A reconnection: the rest of the stream that id names (a POST's answer stream, or the
    // standalone stream), never another session's (digest §6.2; resumable.ts).
    const resumed = lastEventId === undefined ? undefined : (session.streams?.find(lastEventId) ?? notOurs(lastEventId));
    // A call's stream that cannot be resumed has nothing to give; a standalone one that cannot
    // (an id of an earlier hub process that took the session back, or of a stream let go) is
    // opened anew, as without Last-Event-ID: refused, the client would hear no notifications again.
    if (resumed !== undefined && 'problem' in resumed && !resumed.standalone) {
      sendJson(res, 400, errorResponse(undefined, new RpcError(INVALID_REQUEST, `Bad Request: ${resumed.problem}`)));
      return;
    }
    let stream: ResumableStream;
    if (resumed !== undefined && !('problem' in resumed)) {
      // Over, and the client has all of it (a call cancelled or ended without an answer): 204,
      // which an SDK client takes as the end, where an empty stream would have it come back.
      if (resumed.stream.finished && resumed.after >= resumed.stream.lastSeq) return void res.writeHead(204, { 'mcp-session-id': session.id }).end();
      stream = resumed.stream;
      stream.resume(res, req.socket, resumed.after, { 'mcp-session-id': session.id });
      if (!stream.standalone) return this.endAtExpiry(res, who);
      session.stream = stream;
    } else {
      const open = session.stream as ResumableStream | undefined;
      if (open && !open.closed && open.connected) {
        sendJson(res, 409, errorResponse(undefined, new RpcError(INVALID_REQUEST, 'Conflict: only one GET stream per session')));
        return;
      }
      stream = (session.streams ??= new SessionStreams(primes(session.protocolVersion), session.id, this.endpoint.replayBudget)).open(res, req.socket, true);
      session.stream = stream;
    }
    // The key that opened the stream may not be the one that opened the session: either removed ends it.
    session.streamKey = who.key;
    // Taken back by this hub after its restart: what it may have missed meanwhile is said on the stream.
    session.owedUpdates?.streamOpened(session);
    // A client with roots can be asked for them now: a server refused them before is told.
    this.endpoint.rootsChanged(session, true);
    // In use while the stream is open (see SessionTable.endIdleSessions); idle from when it closes.
    session.lastSeen = monotonicNow();
    this.endAtExpiry(res, who);
    res.on('close', () => (session.lastSeen = monotonicNow()));
  }

  /**
   * The token that opened a stream's connection is its credential: the connection ends with it
   * (the client comes back with a fresh one and Last-Event-ID). The session stays; its requests
   * are checked one by one.
   */
  private endAtExpiry(res: EdgeResponse, who: Identity): void {
    const stop = endAtExpiry(who.expiresAt, () => res.end());
    const unwatch = who.lapse?.watch(() => res.end());
    res.on('close', () => {
      stop();
      unwatch?.();
    });
  }

  private deleteSession(req: EdgeRequest, res: EdgeResponse, who: Identity, group: string | undefined): void {
    const version = firstHeaderValue(req.headers['mcp-protocol-version']);
    // As for GET: a modern client has no session to end (digest §6.3: 405, its Mcp-Session-Id
    // ignored), and a legacy one is held to a version the hub speaks (§6.2: 400), its session
    // left as it was.
    if (looksModern(version)) return void res.writeHead(405, { allow: 'POST' }).end();
    const unsupported = unsupportedLegacyVersion(version);
    if (unsupported) return sendJson(res, 400, errorResponse(undefined, unsupported));
    const sid = firstHeaderValue(req.headers['mcp-session-id']);
    if (sid === undefined) {
      sendJson(res, 400, errorResponse(undefined, new RpcError(INVALID_REQUEST, 'Mcp-Session-Id header is required')));
      return;
    }
    if (!this.endpoint.deleteSession(sid, who.principal, group, who.key)) {
      sendJson(res, 404, errorResponse(undefined, new RpcError(-32001, 'Session not found')));
      return;
    }
    res.writeHead(200).end();
  }
}

/** A batch member that is a tools/call request (one a quiet answer is watched for). */
function isToolCall(member: unknown): boolean {
  return typeof member === 'object' && member !== null && (member as { method?: unknown }).method === 'tools/call' && 'id' in member;
}

/**
 * The answers of a batch's members, sent together once every member has answered: held as a
 * JSON array while nothing was streamed, written as events once the channel streams.
 */
class BatchAnswers {
  private held: object[] = [];
  /** The edge's refusals of members, while every member so far was refused with one status. */
  private refusals: EdgeRefusal[] | undefined = [];

  constructor(
    private readonly channel: PostChannel,
    private left: number,
  ) {}

  send(msg: object): void {
    this.channel.send(msg);
    this.release();
  }

  /** A member's answer (none for a notification or a response); `refusal`: the edge refused it. */
  reply(msg: object | undefined, refusal?: EdgeRefusal): void {
    if (msg) this.held.push(msg);
    if (this.refusals && refusal && (this.refusals.length === 0 || this.refusals[0]!.status === refusal.status)) this.refusals.push(refusal);
    else this.refusals = undefined;
    this.release();
    if (--this.left > 0) return;
    if (this.channel.streaming) this.channel.end(undefined);
    else if (this.held.length > 0) {
      const all = this.refusals?.[0] && batchRefusal(this.refusals);
      this.channel.end(arrayOf(this.held), all?.status ?? 200, all?.headers);
    } else this.channel.end(undefined, 202);
  }

  private release(): void {
    if (!this.channel.streaming || this.held.length === 0) return;
    for (const m of this.held) this.channel.send(m);
    this.held = [];
  }
}

/**
 * A batch whose every member the edge refused with one status (all rate-limited, or all short
 * of the same scope) is answered with that status, as its lone messages would be: a client backs
 * off on 429 + Retry-After, steps up on 403's challenge. Retry-After is the longest of the
 * members' (before it, some would still be refused). Members whose other headers differ (403s
 * naming different scopes) leave the batch a 200: one challenge could not ask for all of them.
 */
export function batchRefusal(refusals: readonly EdgeRefusal[]): { status: number; headers: Record<string, string> } | undefined {
  const headers: Record<string, string> = {};
  const names = new Set(refusals.flatMap((r) => Object.keys(r.headers)));
  for (const name of names) {
    const values = refusals.map((r) => r.headers[name]);
    if (name === 'retry-after') headers[name] = String(Math.max(...values.map((v) => Number(v ?? 0))));
    else if (values.every((v) => v !== undefined && v === values[0])) headers[name] = values[0]!;
    else return undefined;
  }
  return { status: refusals[0]!.status, headers };
}
