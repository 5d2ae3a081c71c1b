// The load generator for servers that speak only the deprecated HTTP+SSE transport (2024-11-05):
// one GET stream carries every answer; requests are POSTed (202 Accepted) to the URL of its
// `endpoint` event. Latency is from the POST until the answer with that id arrives on the stream.
// Same closed-loop shape as load.mjs: one keep-alive socket per worker for its POSTs.
import net from 'node:net';
import { buildRequest } from './load.mjs';

const CRLF2 = Buffer.from('\r\n\r\n');

/** A GET event stream on a raw socket: de-chunks the body and emits every `data:` payload. */
function openStream(port, path, onEvent) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.setNoDelay(true);
    let head = null;
    let chunked = false;
    let raw = Buffer.alloc(0);
    let text = '';
    let event = 'message';
    const feed = (s) => {
      text += s;
      let i;
      while ((i = text.indexOf('\n')) >= 0) {
        const line = text.slice(0, i).replace(/\r$/, '');
        text = text.slice(i + 1);
        if (line === '') event = 'message';
        else if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) onEvent(event, line.slice(5).trim());
      }
    };
    sock.on('data', (c) => {
      raw = raw.length ? Buffer.concat([raw, c]) : c;
      if (head === null) {
        const he = raw.indexOf(CRLF2);
        if (he < 0) return;
        head = raw.toString('latin1', 0, he);
        if (!/^HTTP\/1\.1 200/.test(head)) return reject(new Error(`event stream refused: ${head.split('\r\n')[0]}`));
        chunked = /\r\ntransfer-encoding:[ \t]*chunked/i.test(head);
        raw = raw.subarray(he + 4);
        resolve(sock);
      }
      if (!chunked) {
        feed(raw.toString('utf8'));
        raw = Buffer.alloc(0);
        return;
      }
      for (;;) {
        const le = raw.indexOf('\r\n');
        if (le < 0) return;
        const size = parseInt(raw.toString('latin1', 0, le), 16);
        if (raw.length < le + 2 + size + 2) return;
        feed(raw.toString('utf8', le + 2, le + 2 + size));
        raw = raw.subarray(le + 2 + size + 2);
      }
    });
    sock.on('error', reject);
    sock.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\nConnection: keep-alive\r\n\r\n`);
  });
}

/** POST one body on a fresh connection and wait for its status (set-up only). */
async function post(port, path, body) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error(`POST ${path}: ${res.status}`);
}

/**
 * Open an SSE session (endpoint event, initialize, initialized) and run closed-loop workers
 * against it. `params` are the request params for `method`.
 */
export async function runSse({ port, path = '/mcp', method, params, concurrency, warmupMs, measureMs, cpuProbe }) {
  const waiting = new Map(); // id -> callback
  let endpoint;
  let gotEndpoint;
  const endpointSeen = new Promise((r) => (gotEndpoint = r));
  const stream = await openStream(port, path, (event, data) => {
    if (event === 'endpoint') {
      endpoint = data;
      gotEndpoint();
      return;
    }
    const m = /"id":("[^"]*"|\d+)/.exec(data);
    if (!m) return;
    const id = m[1].startsWith('"') ? m[1].slice(1, -1) : Number(m[1]);
    const cb = waiting.get(id);
    if (cb) {
      waiting.delete(id);
      cb(data.includes('"result"'), data);
    }
  });
  await endpointSeen;
  const url = new URL(endpoint, `http://127.0.0.1:${port}`);
  const msgPath = url.pathname + url.search;
  const initialized = new Promise((r) => waiting.set('init', r));
  await post(port, msgPath, { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'switchyard-bench', version: '1.0.0' } } });
  await initialized;
  await post(port, msgPath, { jsonrpc: '2.0', method: 'notifications/initialized' });

  const request = buildRequest({ host: '127.0.0.1', port, path: msgPath, headers: { 'Content-Type': 'application/json' }, body: { jsonrpc: '2.0', id: '__ID__', method, params } });
  const idLen = 16;
  const result = await new Promise((resolve) => {
    const lat = [];
    let errors = 0;
    let sample;
    let measuring = false;
    let stopped = false;
    let tStart = 0;
    let live = concurrency;
    let cpu0 = 0;
    let cpu = 0;
    const socks = [];
    for (let w = 0; w < concurrency; w++) {
      const sock = net.connect(port, '127.0.0.1');
      sock.setNoDelay(true);
      socks.push(sock);
      const bytes = Buffer.from(request.buf);
      let n = 0;
      let acked = true;
      let answered = true;
      let pendingNext = false;
      let buf = '';
      sock.on('data', (c) => {
        // 202s (or errors) for our POSTs; each answer ends with an empty body or a short one.
        buf += c.toString('latin1');
        let he;
        while ((he = buf.indexOf('\r\n\r\n')) >= 0) {
          const head = buf.slice(0, he);
          let end;
          if (/\r\ntransfer-encoding:[ \t]*chunked/i.test(head)) {
            const z = buf.indexOf('\r\n0\r\n\r\n', he + 2);
            if (z < 0) return;
            end = z + 7;
          } else {
            end = he + 4 + Number(/\r\ncontent-length:[ \t]*(\d+)/i.exec(head)?.[1] ?? 0);
            if (buf.length < end) return;
          }
          if (!/^HTTP\/1\.1 2/.test(head)) {
            errors++;
            sample ??= head.split('\r\n')[0];
          }
          buf = buf.slice(end);
          acked = true;
          if (pendingNext && answered) next();
        }
      });
      sock.on('error', () => {});
      const next = () => {
        pendingNext = false;
        if (stopped) {
          if (--live === 0) {
            for (const s of socks) s.destroy();
            stream.destroy();
            lat.sort((a, b) => a - b);
            const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : NaN);
            resolve({ n: lat.length, rps: lat.length / (measureMs / 1000), p50: q(0.5), p99: q(0.99), errors, sample, cpuUs: cpu && lat.length ? cpu / 1000 / lat.length : undefined });
          }
          return;
        }
        const id = `w${String(w).padStart(4, '0')}n${String(++n).padStart(idLen - 6, '0')}`;
        bytes.write(id, request.idOffset, 'latin1');
        const t0 = performance.now();
        const counted = measuring;
        acked = false;
        answered = false;
        waiting.set(id, (ok, data) => {
          const t1 = performance.now();
          answered = true;
          if (counted && !stopped) {
            if (!ok) {
              errors++;
              sample ??= data.slice(0, 200);
            } else if (t0 >= tStart) lat.push(t1 - t0);
          }
          if (acked) next();
          else pendingNext = true;
        });
        sock.write(bytes);
      };
      next();
    }
    setTimeout(() => {
      measuring = true;
      tStart = performance.now();
      if (cpuProbe) cpu0 = cpuProbe();
      setTimeout(() => {
        stopped = true;
        if (cpuProbe) cpu = cpuProbe() - cpu0;
      }, measureMs);
    }, warmupMs);
  });
  return result;
}
