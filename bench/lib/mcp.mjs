// The MCP requests the benchmark sends, serialised once per run.
import { buildRequest } from './load.mjs';

export const MODERN = '2026-07-28';
export const LEGACY = '2025-11-25';
const CLIENT_INFO = { name: 'switchyard-bench', version: '1.0.0' };
const ARGS = { text: 'hello' };

const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
};

/** A named request (`tool`: the hub's name of the tool or prompt) carries the echo's arguments. */
function paramsFor(method, tool) {
  return method === 'tools/call' || method === 'prompts/get' ? { name: tool, arguments: ARGS } : {};
}

/** A modern (2026-07-28) request: full `_meta` and the mirrored headers of digest §6.3. */
export function modernRequest({ port, path = '/mcp', method, tool }) {
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': MODERN,
    'Mcp-Method': method,
  };
  if (method === 'tools/call' || method === 'prompts/get') headers['Mcp-Name'] = tool;
  const body = { jsonrpc: '2.0', id: '__ID__', method, params: { ...paramsFor(method, tool), _meta: MODERN_META } };
  return buildRequest({ host: '127.0.0.1', port, path, headers, body });
}

/** A request inside a legacy (2025-11-25) session that was initialized once; `batch`: as a JSON-RPC batch of one (a 2025-03-26 session's). */
export function legacyRequest({ port, path = '/mcp', method, tool, sessionId, protocolVersion = LEGACY, batch = false }) {
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': protocolVersion,
  };
  if (sessionId) headers['Mcp-Session-Id'] = sessionId;
  const msg = { jsonrpc: '2.0', id: '__ID__', method, params: paramsFor(method, tool) };
  return buildRequest({ host: '127.0.0.1', port, path, headers, body: batch ? [msg] : msg });
}

/** One stdio line (legacy session already initialized by the caller). */
export function stdioLine(method, tool) {
  return JSON.stringify({ jsonrpc: '2.0', id: '__ID__', method, params: paramsFor(method, tool) });
}

/** Open a legacy session over Streamable HTTP (asking for `asked`); resolves to its Mcp-Session-Id (or undefined). */
export async function openLegacySession(url, asked = LEGACY) {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: asked, capabilities: {}, clientInfo: CLIENT_INFO } }),
  });
  const text = await res.text();
  if (!res.ok || !text.includes('"result"')) throw new Error(`initialize failed: ${res.status} ${text.slice(0, 300)}`);
  const sessionId = res.headers.get('mcp-session-id') ?? undefined;
  const version = /"protocolVersion":"([^"]+)"/.exec(text)?.[1] ?? LEGACY;
  const h = { ...headers, 'mcp-protocol-version': version };
  if (sessionId) h['mcp-session-id'] = sessionId;
  await fetch(url, { method: 'POST', headers: h, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) }).then((r) => r.arrayBuffer());
  return { sessionId, protocolVersion: version };
}

/** One JSON-RPC request with fetch (set-up and checks, not measured); returns the parsed result. */
export async function rpc(url, method, params = {}, { modern = true, headers = {} } = {}) {
  const h = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers };
  const p = { ...params };
  if (modern) {
    h['mcp-protocol-version'] = MODERN;
    h['mcp-method'] = method;
    if (method === 'tools/call') h['mcp-name'] = params.name;
    p._meta = MODERN_META;
  }
  const res = await fetch(url, { method: 'POST', headers: h, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: p }) });
  let text = await res.text();
  if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const data = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean);
    text = data[data.length - 1] ?? '';
  }
  const msg = JSON.parse(text);
  if (!msg.result) throw new Error(`${method} failed: ${res.status} ${text.slice(0, 300)}`);
  return msg.result;
}
