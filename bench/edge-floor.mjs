// The HTTP edge's floor: CPU per request of three bare servers that read a JSON-RPC POST and
// answer a constant-shaped result, under the same load as `npm run bench` (docs/BENCHMARKS.md,
// "The edge"): node:http, Switchyard's fast path (`Http1Edge`, built dist/), and a plain `net`
// server that parses nothing but Content-Length (the floor for any Node HTTP server).
//
//   node bench/edge-floor.mjs [--concurrency 64] [--measure-ms 3000] [--runs 3]
//   node bench/edge-floor.mjs --serve <node-http|edge|net>     (one server; prints its URL)
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { numberOption, option } from './lib/args.mjs';
import { runHttp } from './lib/load.mjs';
import { modernRequest } from './lib/mcp.mjs';
import { cpuNs } from './lib/procs.mjs';


function answer(bodyText) {
  const m = JSON.parse(bodyText);
  return JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { resultType: 'complete', content: [{ type: 'text', text: 'hi' }] } });
}

async function serve(kind) {
  let port;
  if (kind === 'node-http') {
    const s = createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const out = answer(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
        res.end(out);
      });
    });
    s.keepAliveTimeout = 65_000;
    await new Promise((r) => s.listen(0, '127.0.0.1', r));
    port = s.address().port;
  } else if (kind === 'edge') {
    const { Http1Edge } = await import('../dist/src/transport/http1/edge.js');
    const fallback = createServer((_req, res) => res.writeHead(500).end());
    const edge = new Http1Edge(
      fallback,
      (req, res) => {
        const out = answer(req.body.toString('utf8'));
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
        res.end(out);
      },
      { wants: (p) => p === '/mcp', maxBodyBytes: 4 << 20, keepAliveMs: 65_000, requestTimeoutMs: 66_000 },
    );
    port = (await edge.listen('127.0.0.1', 0)).port;
  } else if (kind === 'net') {
    const CRLF2 = Buffer.from('\r\n\r\n');
    const s = net.createServer({ noDelay: true }, (sock) => {
      let buf = null;
      sock.on('error', () => {});
      sock.on('data', (c) => {
        buf = buf ? Buffer.concat([buf, c]) : c;
        for (;;) {
          const end = buf.indexOf(CRLF2);
          if (end < 0) return;
          const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(buf.toString('latin1', 0, end))?.[1] ?? 0);
          if (buf.length < end + 4 + len) return;
          const out = answer(buf.toString('utf8', end + 4, end + 4 + len));
          buf = buf.length === end + 4 + len ? null : buf.subarray(end + 4 + len);
          sock.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(out)}\r\nconnection: keep-alive\r\n\r\n${out}`);
          if (!buf) return;
        }
      });
    });
    await new Promise((r) => s.listen(0, '127.0.0.1', r));
    port = s.address().port;
  } else throw new Error(`unknown server kind ${kind}`);
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}/mcp` }));
}

async function measure(kind, concurrency, measureMs) {
  const p = spawn(process.execPath, [fileURLToPath(import.meta.url), '--serve', kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    p.once('exit', (code) => reject(new Error(`${kind} exited with ${code}`)));
    p.stdout.on('data', (d) => {
      const m = /127\.0\.0\.1:(\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    });
  });
  try {
    const request = modernRequest({ port, method: 'tools/call', tool: 'echo' });
    return await runHttp({ port, request, concurrency, warmupMs: 1000, measureMs, cpuProbe: () => cpuNs(p.pid) });
  } finally {
    p.kill();
  }
}

if (option('serve')) await serve(option('serve'));
else {
  const concurrency = numberOption('concurrency', 64);
  const measureMs = numberOption('measure-ms', 3000);
  const runs = numberOption('runs', 3);
  console.log(`concurrency ${concurrency}, ${measureMs} ms per run, ${runs} interleaved runs`);
  for (let r = 0; r < runs; r++)
    for (const kind of ['node-http', 'edge', 'net']) {
      const m = await measure(kind, concurrency, measureMs);
      console.log(`${kind.padEnd(10)} ${String(Math.round(m.rps)).padStart(7)} req/s  ${m.cpuUs.toFixed(1).padStart(6)} µs CPU/request  p50 ${m.p50.toFixed(3)} ms  errors ${m.errors}`);
    }
}
