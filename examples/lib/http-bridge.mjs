// Serves a web-standard fetch handler (Request -> Response) from node:http.
// SDK v2's createMcpHandler / WebStandardStreamableHTTPServerTransport speak the
// fetch API; this bridge lets the examples and test fixtures use plain node:http
// without an extra adapter dependency. Loopback only.
import http from 'node:http';
import { Readable } from 'node:stream';

const LOCAL_HOSTNAMES = new Set(['127.0.0.1', 'localhost', '[::1]']);

// DNS-rebinding guard: a page on evil.example that resolves to 127.0.0.1 still sends its
// own Host/Origin, so anything but a loopback name is refused before the MCP handler runs.
export function isLoopbackRequest(req) {
  const host = String(req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
  if (!LOCAL_HOSTNAMES.has(host)) return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return LOCAL_HOSTNAMES.has(new URL(origin).hostname.toLowerCase());
  } catch {
    return false;
  }
}

/** Build a web Request from a node IncomingMessage; `signal` aborts when the client goes away. */
function toWebRequest(req, signal) {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  const url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
  const init = { method: req.method, headers, signal };
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    init.body = Readable.toWeb(req);
    init.duplex = 'half';
  }
  return new Request(url, init);
}

/** Copy a web Response onto a node ServerResponse, streaming the body (SSE included). */
async function writeWebResponse(response, res) {
  const headers = {};
  response.headers.forEach((value, key) => {
    headers[key] = value;
  });
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  res.on('close', () => {
    reader.cancel().catch(() => {});
  });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } catch {
    // The client disconnected or the handler aborted the stream; nothing to report.
  }
  res.end();
}

/**
 * Listen on 127.0.0.1:`port` (0 = any free port) and route every request to `handle(request)`.
 * Only `path` is served; anything else is 404. Returns the bound port and a close function.
 * An idle kept-alive connection is kept `keepAliveTimeoutMs` (default 30 s, as load balancers
 * commonly do; node:http's own is 5 s): a client whose idle timer runs late, on a busy machine,
 * then does not send a request just as the server closes the connection under it.
 */
export async function serveFetch(handle, { port = 0, path = '/mcp', onError, keepAliveTimeoutMs = 30_000 } = {}) {
  const server = http.createServer({ keepAliveTimeout: keepAliveTimeoutMs }, async (req, res) => {
    const controller = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    try {
      const pathname = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
      if (pathname !== path) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        return;
      }
      if (!isLoopbackRequest(req)) {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Forbidden: non-loopback Host or Origin' } }));
        return;
      }
      const response = await handle(toWebRequest(req, controller.signal));
      await writeWebResponse(response, res);
    } catch (error) {
      onError?.(error);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end();
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** Parse `--http PORT` from argv; undefined means stdio mode. */
export function httpPortFromArgv(argv = process.argv.slice(2)) {
  const i = argv.indexOf('--http');
  if (i === -1) return undefined;
  const port = Number(argv[i + 1]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`invalid --http port: ${argv[i + 1]}\n`);
    process.exit(2);
  }
  return port;
}
