// Sessionful 2025-era Streamable HTTP for SDK v1 servers on node:http (127.0.0.1 only).
// One McpServer + StreamableHTTPServerTransport per session, keyed by Mcp-Session-Id,
// which is how a typical deployed legacy server behaves (and what the hub must cope with).
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isLoopbackRequest } from './http-bridge.mjs';

const MAX_BODY = 4 * 1024 * 1024;

function readJsonBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        resolve(undefined);
      }
    });
    req.on('error', reject);
  });
}

function jsonRpcError(res, status, code, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } }));
}

/**
 * Serve `createServer()` (an SDK v1 McpServer factory) with sessions on POST/GET/DELETE `path`.
 * `transportOptions()` adds options to each session's transport (an event store and a retry
 * interval make its streams resumable). `holdMs(body)`, if given, is how long a POST with that
 * body waits before it is handled and answered (test fixtures: a message slow on the network).
 * `keepAliveTimeoutMs`, if given, replaces node:http's 5 s idle timeout of a kept-alive connection.
 */
export async function serveLegacySessions(createServer, { port = 0, path = '/mcp', log = () => {}, transportOptions = () => ({}), holdMs = () => 0, keepAliveTimeoutMs } = {}) {
  const sessions = new Map();

  const server = http.createServer(async (req, res) => {
    try {
      if (new URL(req.url ?? '/', 'http://127.0.0.1').pathname !== path) {
        res.writeHead(404).end();
        return;
      }
      if (!isLoopbackRequest(req)) return jsonRpcError(res, 403, -32000, 'Forbidden: non-loopback Host or Origin');
      const sessionId = req.headers['mcp-session-id'];
      const body = req.method === 'POST' ? await readJsonBody(req) : undefined;
      const hold = body === undefined ? 0 : holdMs(body);
      if (hold > 0) await new Promise((r) => setTimeout(r, hold));

      if (typeof sessionId === 'string') {
        const transport = sessions.get(sessionId);
        if (!transport) return jsonRpcError(res, 404, -32001, 'Session not found');
        await transport.handleRequest(req, res, body);
        return;
      }
      if (req.method !== 'POST' || body?.method !== 'initialize') {
        return jsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
      }
      const transport = new StreamableHTTPServerTransport({
        ...transportOptions(),
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          sessions.set(id, transport);
          log(`session ${id} opened`);
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await createServer().connect(transport);
      await transport.handleRequest(req, res, body);
    } catch (error) {
      log(`http error: ${error instanceof Error ? error.message : String(error)}`);
      if (!res.headersSent) jsonRpcError(res, 500, -32603, 'Internal error');
      else res.end();
    }
  });

  if (keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = keepAliveTimeoutMs;
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    sessions,
    close: async () => {
      for (const t of sessions.values()) await t.close().catch(() => {});
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
