#!/usr/bin/env node
// The forwarding limit: the least a Node HTTP front for an MCP server can do. No validation,
// no ledger, no catalog, no era handling: each POST body is parsed, its id swapped for a fresh
// one, written as one line to the child's stdin; each stdout line is parsed, its id swapped
// back, and sent as the POST's answer. What Switchyard does beyond this is what it costs.
//
//   node bench/forwarder.mjs [--port 0] -- <command> [args...]     stdio upstream
//   node bench/forwarder.mjs [--port 0] --http <url>                  HTTP upstream (bytes piped)
//
// The stdio child gets one legacy initialize + notifications/initialized first (the echo
// upstream is legacy). Prints "LISTENING <port>" on stdout; listens on 127.0.0.1 only.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { Pool } from 'undici';
import { numberOption, option } from './lib/args.mjs';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
const own = dash >= 0 ? argv.slice(0, dash) : argv;
const PORT = numberOption('port', 0, own);
const HTTP_URL = option('http', undefined, own);

function reply(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req, done) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
}

/** HTTP → stdio with id remapping. */
function stdioForwarder(command, args) {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const pending = new Map(); // upstream id -> { res, id }
  let nextId = 0;
  let rest = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop();
    for (const line of lines) {
      if (!line) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      const p = pending.get(msg.id);
      if (!p) continue;
      pending.delete(msg.id);
      msg.id = p.id;
      reply(p.res, 200, JSON.stringify(msg));
    }
  });
  child.on('exit', () => process.exit(1));
  const ready = new Promise((resolve) => {
    const id = ++nextId;
    pending.set(id, { id, res: { writeHead() {}, end: () => resolve() } });
    child.stdin.write(
      JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'forwarder', version: '1' } } }) + '\n',
    );
  }).then(() => child.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n'));
  const handler = (req, res) => {
    readBody(req, (body) => {
      let msg;
      try {
        msg = JSON.parse(body);
      } catch {
        return reply(res, 400, '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}');
      }
      if (msg.id === undefined) {
        child.stdin.write(JSON.stringify(msg) + '\n');
        res.writeHead(202).end();
        return;
      }
      const id = ++nextId;
      pending.set(id, { id: msg.id, res });
      msg.id = id;
      child.stdin.write(JSON.stringify(msg) + '\n');
    });
  };
  return { ready, handler, stop: () => child.kill() };
}

/**
 * HTTP → HTTP: the body and the MCP headers are piped through undici's pool with a bare
 * dispatch handler, the cheapest Node HTTP client we know (Switchyard uses the same one).
 */
function httpForwarder(url) {
  const target = new URL(url);
  const pool = new Pool(target.origin, { headersTimeout: 0, bodyTimeout: 0 });
  const handler = (req, res) => {
    readBody(req, (body) => {
      const headers = { 'content-type': 'application/json' };
      for (const h of ['accept', 'mcp-protocol-version', 'mcp-method', 'mcp-name', 'mcp-session-id']) if (req.headers[h]) headers[h] = req.headers[h];
      let status = 0;
      let type = 'application/json';
      const parts = [];
      pool.dispatch(
        { path: target.pathname, method: 'POST', headers, body },
        {
          onRequestStart() {},
          onResponseStart(_c, s, h) {
            status = s;
            if (h['content-type']) type = h['content-type'];
          },
          onResponseData(_c, chunk) {
            parts.push(chunk);
          },
          // Buffered, so the answer leaves in one write (head + body) like the other targets'.
          onResponseEnd() {
            const answer = parts.length === 1 ? parts[0] : Buffer.concat(parts);
            res.writeHead(status, { 'content-type': type, 'content-length': answer.length });
            res.end(answer);
          },
          onResponseError() {
            reply(res, 502, '{"jsonrpc":"2.0","error":{"code":-32603,"message":"upstream failed"}}');
          },
        },
      );
    });
  };
  return { ready: Promise.resolve(), handler, stop: () => pool.destroy() };
}

if (!HTTP_URL && (dash < 0 || argv[dash + 1] === undefined)) {
  process.stderr.write('usage: forwarder.mjs [--port P] -- <command> [args...] | --http <url>\n');
  process.exit(2);
}
const fwd = HTTP_URL ? httpForwarder(HTTP_URL) : stdioForwarder(argv[dash + 1], argv.slice(dash + 2));
await fwd.ready;
const server = createServer(fwd.handler);
server.keepAliveTimeout = 65_000;
server.listen(PORT, '127.0.0.1', () => process.stdout.write(`LISTENING ${server.address().port}\n`));
const stop = () => {
  fwd.stop();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
