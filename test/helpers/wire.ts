/**
 * Raw Streamable HTTP for acceptance tests: hand-built requests of both eras, replies parsed
 * from JSON or SSE, and a recording `fetch` that SDK transports can use so a test sees the
 * exact bytes an SDK hides (resultType, ttlMs, cacheScope, session headers).
 * Protocol constants are spelled out here on purpose rather than imported from src/.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';

export const MODERN_VERSION = '2026-07-28';
export const LEGACY_VERSION = '2025-11-25';
export const META_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CAPS = 'io.modelcontextprotocol/clientCapabilities';
export const META_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

/** Methods whose modern `complete` results must carry ttlMs/cacheScope (digest §3.3). */
export const CACHEABLE = new Set(['server/discover', 'tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']);

export type Json = Record<string, unknown>;
export interface RpcMessage {
  jsonrpc?: unknown;
  id?: unknown;
  method?: string;
  params?: Json;
  result?: Json;
  error?: { code: number; message: string; data?: unknown };
}

/** The text of a tool result's first content block, as sent (undefined when it has none). */
export function firstText(result: Json | undefined): unknown {
  return (result?.content as Json[] | undefined)?.[0]?.text;
}

/** The required per-request `_meta` of a modern request. */
export function modernMeta(extra: Json = {}): Json {
  return { [META_VERSION]: MODERN_VERSION, [META_CAPS]: {}, [META_INFO]: { name: 'raw-test', version: '1.0.0' }, ...extra };
}

export function modernBody(id: string | number, method: string, params: Json = {}, meta: Json = modernMeta()): Json {
  return { jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } };
}

/** Headers a modern client sends with `method` (Mcp-Name for the three named methods). */
export function modernHeaders(method: string, name?: string, version = MODERN_VERSION): Record<string, string> {
  const h: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': version,
    'mcp-method': method,
  };
  if (name !== undefined) h['mcp-name'] = name;
  return h;
}

/** JSON-RPC messages in a response body, whether plain JSON or an SSE stream. */
export function parseMessages(contentType: string | null, text: string): RpcMessage[] {
  if (!text) return [];
  if ((contentType ?? '').includes('text/event-stream')) {
    const out: RpcMessage[] = [];
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data) out.push(JSON.parse(data) as RpcMessage);
    }
    return out;
  }
  return [JSON.parse(text) as RpcMessage];
}

export interface RawReply {
  status: number;
  headers: Headers;
  text: string;
  messages: RpcMessage[];
  /** The last message (the final response of a request), if any. */
  body: RpcMessage | undefined;
}

/** POST a body (an object is JSON-encoded, a string is sent as is). */
export async function post(url: string, body: unknown, headers: Record<string, string>): Promise<RawReply> {
  const res = await fetch(url, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let messages: RpcMessage[] = [];
  try {
    messages = parseMessages(res.headers.get('content-type'), text);
  } catch {
    messages = [];
  }
  return { status: res.status, headers: res.headers, text, messages, body: messages.at(-1) };
}

/** One modern request, headers matching the body. */
export function modernPost(url: string, id: string | number, method: string, params: Json = {}): Promise<RawReply> {
  const name = typeof params.name === 'string' ? params.name : typeof params.uri === 'string' ? params.uri : undefined;
  const named = method === 'tools/call' || method === 'prompts/get' || method === 'resources/read';
  return post(url, modernBody(id, method, params), modernHeaders(method, named ? name : undefined));
}

/** A raw legacy session: initialize + notifications/initialized, then requests carrying its id. */
export async function legacySession(
  url: string,
  opts: { capabilities?: Json } = {},
): Promise<{ sessionId: string; init: RawReply; request(id: number, method: string, params?: Json): Promise<RawReply> }> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await post(
    url,
    { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: opts.capabilities ?? {}, clientInfo: { name: 'raw-legacy', version: '1.0.0' } } },
    headers,
  );
  const sessionId = init.headers.get('mcp-session-id');
  if (!sessionId) throw new Error(`initialize gave no session: ${init.status} ${init.text}`);
  const h = { ...headers, 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY_VERSION };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  return { sessionId, init, request: (id, method, params = {}) => post(url, { jsonrpc: '2.0', id, method, params }, h) };
}

export interface WireExchange {
  request: RpcMessage;
  status: number;
  headers: Headers;
  messages: RpcMessage[];
}

/**
 * A `fetch` for SDK transports that records every POST: the request body and every JSON-RPC
 * message of its answer. SSE answers are read from a clone, so the SDK sees an untouched stream;
 * call `settled()` before asserting.
 */
export function recordingFetch(): { fetch: typeof fetch; exchanges: WireExchange[]; settled(): Promise<WireExchange[]> } {
  const exchanges: WireExchange[] = [];
  const pending: Promise<void>[] = [];
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if ((init?.method ?? 'GET').toUpperCase() !== 'POST' || typeof init?.body !== 'string') return res;
    const request = JSON.parse(init.body) as RpcMessage;
    const clone = res.clone();
    pending.push(
      clone.text().then(
        (text) => {
          exchanges.push({ request, status: res.status, headers: res.headers, messages: parseMessages(res.headers.get('content-type'), text) });
        },
        () => {
          exchanges.push({ request, status: res.status, headers: res.headers, messages: [] });
        },
      ),
    );
    return res;
  };
  return {
    fetch: recording,
    exchanges,
    settled: async () => {
      await Promise.all(pending);
      return exchanges;
    },
  };
}

/**
 * A `fetch` for a legacy SDK transport, and `streamOpen`, resolved once its GET stream was
 * answered: the hub sends the session's notifications there from then on, and keeps none for a
 * session without one. Waited for instead of a fixed time after connect (a loaded machine may
 * open it later).
 */
export function streamWatchingFetch(): { fetch: typeof fetch; streamOpen: Promise<void> } {
  let opened!: () => void;
  const streamOpen = new Promise<void>((resolve) => (opened = resolve));
  const watching: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if ((init?.method ?? 'GET').toUpperCase() === 'GET' && res.ok) opened();
    return res;
  };
  return { fetch: watching, streamOpen };
}

/** Each request of the recording that got a result, with that result. */
export function resultsOf(exchanges: WireExchange[]): { method: string; result: Json }[] {
  const out: { method: string; result: Json }[] = [];
  for (const ex of exchanges) {
    if (ex.request.id === undefined || !ex.request.method) continue;
    const reply = ex.messages.find((m) => m.id === ex.request.id && m.result !== undefined);
    if (reply) out.push({ method: ex.request.method, result: reply.result! });
  }
  return out;
}

export interface Health {
  status: string;
  servers: { id: string; state: string; era: string | null; tools: number }[];
}

export async function health(mcpUrl: string): Promise<Health> {
  const res = await fetch(new URL('/healthz', mcpUrl));
  return (await res.json()) as Health;
}

/** Poll /healthz until every named upstream is ready (or throw with the last health seen). */
export async function waitForReady(mcpUrl: string, ids: string[], timeoutMs = 20_000): Promise<Health> {
  const deadline = Date.now() + timeoutMs;
  let last: Health | undefined;
  while (Date.now() < deadline) {
    last = await health(mcpUrl);
    if (ids.every((id) => last!.servers.some((s) => s.id === id && s.state === 'ready'))) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`upstreams not ready after ${timeoutMs} ms: ${JSON.stringify(last)}`);
}

/**
 * A request through node:http, for what `fetch` will not send: a foreign Host header, a header
 * twice (an array value), or a chunked body with no Content-Length.
 */
export function rawHttp(
  url: string,
  opts: { method?: string; headers?: Record<string, string | string[]>; chunks?: string[] },
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = httpRequest(
      { host: u.hostname, port: u.port, path: u.pathname, method: opts.method ?? 'POST', headers: opts.headers },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    for (const c of opts.chunks ?? []) req.write(c);
    req.end();
  });
}

/** Reads a streaming answer (SSE) in the background; the function given back is its text so far. */
export function heardSoFar(res: Response): () => string {
  let text = '';
  void (async () => {
    const dec = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) text += dec.decode(chunk, { stream: true });
  })().catch(() => undefined);
  return () => text;
}

/**
 * Keeps a streaming answer open while the test holds no reference to it. Node's fetch (undici)
 * cancels an unlocked body once its Response is garbage-collected, which closes the stream
 * under the test (seen in CI: a "busy" session went idle and was evicted). A locked body is
 * left alone; the caller ends the stream with its AbortController.
 */
export function keepOpen(res: Response): void {
  res.body?.getReader();
}
