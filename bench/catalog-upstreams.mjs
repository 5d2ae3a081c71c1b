#!/usr/bin/env node
// Many modern (2026-07-28) MCP servers in one process, for the catalog benchmark: server i
// answers at http://127.0.0.1:<port>/s/<i>/mcp with TOOLS tools. Raw JSON-RPC, no SDK, so the
// upstreams cost the hub nothing it must not pay anyway. Lists carry ttlMs 1 h, cacheScope public.
//   node bench/catalog-upstreams.mjs --servers 100 --tools 50   → prints LISTENING <port>
import http from 'node:http';
import { numberOption } from './lib/args.mjs';

const SERVERS = numberOption('servers', 100);
const TOOLS = numberOption('tools', 50);
const lists = [];
let listCalls = 0;
for (let s = 0; s < SERVERS; s++) {
  const tools = [];
  for (let t = 0; t < TOOLS; t++)
    tools.push({
      name: `tool_${t}`,
      description: `Tool ${t} of server ${s}: does one small thing and reports the result as text.`,
      inputSchema: { type: 'object', properties: { text: { type: 'string', description: 'Some input' }, n: { type: 'integer' } }, required: ['text'] },
      annotations: { readOnlyHint: t % 2 === 0 },
    });
  lists.push(JSON.stringify({ resultType: 'complete', tools, ttlMs: 3_600_000, cacheScope: 'public' }));
}
const DISCOVER = JSON.stringify({
  resultType: 'complete',
  supportedVersions: ['2026-07-28'],
  capabilities: { tools: {} },
  ttlMs: 0,
  cacheScope: 'public',
  _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'bench-upstream', version: '1.0.0' } },
});

const server = http.createServer((req, res) => {
  const m = /^\/s\/(\d+)\/mcp$/.exec(req.url ?? '');
  if (!m || req.method !== 'POST' || Number(m[1]) >= SERVERS) return res.writeHead(404).end();
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    let msg;
    try {
      msg = JSON.parse(body);
    } catch {
      return res.writeHead(400).end();
    }
    if (msg.id === undefined) return res.writeHead(202).end();
    let result;
    if (msg.method === 'server/discover') result = DISCOVER;
    else if (msg.method === 'tools/list') {
      listCalls++;
      result = lists[Number(m[1])];
    } else if (msg.method === 'tools/call') result = JSON.stringify({ resultType: 'complete', content: [{ type: 'text', text: 'ok' }] });
    else if (msg.method === 'bench/stats') result = JSON.stringify({ listCalls });
    const out = result
      ? `{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":${result}}`
      : JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } });
    res.writeHead(result ? 200 : 404, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) }).end(out);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`LISTENING ${server.address().port}\n`));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
