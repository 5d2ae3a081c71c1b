#!/usr/bin/env node
// A modern-era (2026-07-28) MCP echo server over Streamable HTTP, written raw (no SDK) so that
// the upstream is never what a benchmark measures. It validates nothing: server/discover,
// tools/list (with ttlMs and cacheScope) and tools/call (with resultType) are answered with
// plain JSON, other methods get 404 + -32601, notifications 202, GET/DELETE 405.
//
//   node bench/echo-http.mjs [--port 0] [--tools N]      prints "LISTENING <port>" on stdout
//
// Listens on 127.0.0.1 only.
import { createServer } from 'node:http';
import { numberOption } from './lib/args.mjs';

const PORT = numberOption('port', 0);
const TOOL_COUNT = Math.max(1, numberOption('tools', 1));
const SERVER_INFO = { name: 'bench-echo-http', version: '1.0.0' };
const META = { 'io.modelcontextprotocol/serverInfo': SERVER_INFO };

const tools = [];
for (let i = 0; i < TOOL_COUNT; i++) {
  tools.push({
    name: i === 0 ? 'echo' : `t${i}`,
    description: 'Echoes its text argument back.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
  });
}
const LIST_RESULT = JSON.stringify({ tools, ttlMs: 60_000, cacheScope: 'public', resultType: 'complete', _meta: META });
const DISCOVER_RESULT = JSON.stringify({
  resultType: 'complete',
  supportedVersions: ['2026-07-28'],
  capabilities: { tools: {} },
  ttlMs: 3_600_000,
  cacheScope: 'public',
  _meta: META,
});

function send(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const server = createServer((req, res) => {
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' }).end();
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let msg;
    try {
      msg = JSON.parse(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    } catch {
      return send(res, 400, '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}');
    }
    if (msg?.id === undefined) {
      res.writeHead(202).end();
      return;
    }
    const id = JSON.stringify(msg.id);
    const ok = (result) => send(res, 200, `{"jsonrpc":"2.0","id":${id},"result":${result}}`);
    switch (msg.method) {
      case 'server/discover':
        return ok(DISCOVER_RESULT);
      case 'tools/list':
        return ok(LIST_RESULT);
      case 'tools/call': {
        const text = msg.params?.arguments?.text;
        return ok(JSON.stringify({ content: [{ type: 'text', text: typeof text === 'string' ? text : '' }], resultType: 'complete', _meta: META }));
      }
      default:
        return send(res, 404, `{"jsonrpc":"2.0","id":${id},"error":{"code":-32601,"message":"Method not found"}}`);
    }
  });
});
server.keepAliveTimeout = 65_000;
server.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`LISTENING ${server.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
