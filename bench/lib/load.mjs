// The load generator: closed-loop workers, each on its own raw keep-alive HTTP/1.1 socket,
// sending a request that was serialised once (only the id digits are patched in place), and
// parsing no more of the answer than its status, its length and whether it holds a result.
// Cheaper per request than node:http's client, so on a 2-core machine the load generator
// takes as little CPU as possible from the process under test.
import net from 'node:net';
import { spawn } from 'node:child_process';

const ID_WIDTH = 16;
const ID_PLACEHOLDER = '#'.repeat(ID_WIDTH);
const CRLF2 = Buffer.from('\r\n\r\n');
const RESULT = Buffer.from('"result"');

/** Request id for worker w, sequence n: a fixed-width string, so Content-Length never changes. */
function idFor(w, n) {
  return `w${String(w).padStart(4, '0')}n${String(n).padStart(ID_WIDTH - 6, '0')}`;
}

/**
 * A full HTTP request whose JSON body carries `"id":"################"`; returns the bytes
 * and the offset of the id so a worker can patch it without re-serialising anything.
 */
export function buildRequest({ host, port, path, headers, body }) {
  const text = JSON.stringify(body).replace('"id":"__ID__"', `"id":"${ID_PLACEHOLDER}"`);
  if (!text.includes(ID_PLACEHOLDER)) throw new Error('request body needs id "__ID__"');
  const bodyBuf = Buffer.from(text);
  let head = `POST ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nConnection: keep-alive\r\nContent-Length: ${bodyBuf.length}\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  const buf = Buffer.concat([Buffer.from(head + '\r\n'), bodyBuf]);
  return { buf, idOffset: buf.indexOf(ID_PLACEHOLDER) };
}

/** One keep-alive connection with one request in flight at a time. */
class Conn {
  constructor(host, port) {
    this.host = host;
    this.port = port;
    this.cb = null;
    this.buf = null;
    this.open();
  }

  open() {
    this.sock = net.connect(this.port, this.host);
    this.sock.setNoDelay(true);
    this.sock.on('data', (c) => this.onData(c));
    this.sock.on('error', () => {});
    this.sock.on('close', () => {
      const cb = this.cb;
      this.cb = null;
      this.buf = null;
      this.closed = true;
      if (cb) cb(new Error('connection closed'), 0, false);
    });
    this.closed = false;
  }

  send(bytes, cb) {
    if (this.closed) this.open();
    this.cb = cb;
    this.sock.write(bytes);
  }

  onData(chunk) {
    this.buf = this.buf === null ? chunk : Buffer.concat([this.buf, chunk]);
    const buf = this.buf;
    const he = buf.indexOf(CRLF2);
    if (he < 0) return;
    const head = buf.toString('latin1', 0, he);
    const status = Number(head.slice(9, 12));
    const start = he + 4;
    let end;
    let body;
    const cl = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
    if (cl) {
      end = start + Number(cl[1]);
      if (buf.length < end) return;
      body = buf.subarray(start, end);
    } else if (/\r\ntransfer-encoding:[ \t]*chunked/i.test(head)) {
      const parts = [];
      let pos = start;
      for (;;) {
        const le = buf.indexOf('\r\n', pos);
        if (le < 0) return;
        const size = parseInt(buf.toString('latin1', pos, le), 16);
        if (size === 0) {
          if (buf.length < le + 4) return;
          end = le + 4;
          break;
        }
        if (buf.length < le + 2 + size + 2) return;
        parts.push(buf.subarray(le + 2, le + 2 + size));
        pos = le + 2 + size + 2;
      }
      body = parts.length === 1 ? parts[0] : Buffer.concat(parts);
    } else {
      end = start;
      body = buf.subarray(start, start);
    }
    this.buf = buf.length > end ? buf.subarray(end) : null;
    if (/\r\nconnection:[ \t]*close/i.test(head)) this.sock.destroy();
    const cb = this.cb;
    this.cb = null;
    if (cb) cb(null, status, status === 200 && body.includes(RESULT), body);
  }

  close() {
    this.cb = null;
    this.sock.destroy();
  }
}

function stats(lat, elapsedMs, errors, sample, cpu) {
  lat.sort((a, b) => a - b);
  const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : NaN);
  // CPU time the measured process spent per answered request (µs), when a probe was given.
  const cpuUs = cpu && lat.length ? cpu / 1000 / lat.length : undefined;
  return { n: lat.length, rps: lat.length / (elapsedMs / 1000), p50: q(0.5), p99: q(0.99), errors, sample, cpuUs };
}

/**
 * Run `concurrency` closed-loop workers against one HTTP endpoint for warmupMs, then measure
 * for measureMs. Latency in ms per request; throughput counts requests that started and
 * ended inside the measuring window.
 */
export function runHttp({ host = '127.0.0.1', port, request, concurrency, warmupMs, measureMs, cpuProbe }) {
  return new Promise((resolve) => {
    const lat = [];
    let errors = 0;
    let sample;
    let measuring = false;
    let stopped = false;
    let tStart = 0;
    let live = concurrency;
    const conns = [];
    let cpu0 = 0;
    let cpu = 0;
    const finish = () => {
      for (const c of conns) c.close();
      resolve(stats(lat, measureMs, errors, sample, cpu));
    };
    for (let w = 0; w < concurrency; w++) {
      const conn = new Conn(host, port);
      conns.push(conn);
      const bytes = Buffer.from(request.buf); // own copy: the id is patched in place
      let n = 0;
      const loop = () => {
        if (stopped) {
          if (--live === 0) finish();
          return;
        }
        bytes.write(idFor(w, ++n), request.idOffset, 'latin1');
        const t0 = performance.now();
        const counted = measuring;
        conn.send(bytes, (err, status, ok, body) => {
          const t1 = performance.now();
          if (counted && !stopped) {
            if (err || !ok) {
              errors++;
              if (sample === undefined) sample = err ? err.message : `${status} ${body?.toString('utf8', 0, 300)}`;
            } else if (t0 >= tStart) lat.push(t1 - t0);
          }
          loop();
        });
      };
      loop();
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
}

/**
 * A minimal in-process stdio MCP client: spawns the server, runs the legacy handshake, then
 * keeps `concurrency` requests in flight on the one pipe.
 */
export async function runStdio({ command, args, line, concurrency, warmupMs, measureMs }) {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const pending = new Map();
  let rest = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop();
    for (const l of lines) {
      if (!l) continue;
      const msg = JSON.parse(l);
      const cb = pending.get(msg.id);
      if (cb) {
        pending.delete(msg.id);
        cb(msg);
      }
    }
  });
  const call = (id, text, cb) => {
    pending.set(id, cb);
    child.stdin.write(text);
  };
  await new Promise((r) =>
    call(0, JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } }) + '\n', r),
  );
  child.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
  const [before, after] = line.split('"__ID__"');
  const res = await new Promise((resolve) => {
    const lat = [];
    let errors = 0;
    let sample;
    let measuring = false;
    let stopped = false;
    let tStart = 0;
    let live = concurrency;
    let seq = 0;
    for (let w = 0; w < concurrency; w++) {
      const loop = () => {
        if (stopped) {
          if (--live === 0) resolve(stats(lat, measureMs, errors, sample));
          return;
        }
        const id = ++seq;
        const t0 = performance.now();
        const counted = measuring;
        call(id, before + id + after + '\n', (msg) => {
          const t1 = performance.now();
          if (counted && !stopped) {
            if (!msg.result) {
              errors++;
              sample ??= JSON.stringify(msg).slice(0, 300);
            } else if (t0 >= tStart) lat.push(t1 - t0);
          }
          loop();
        });
      };
      loop();
    }
    setTimeout(() => {
      measuring = true;
      tStart = performance.now();
      setTimeout(() => (stopped = true), measureMs);
    }, warmupMs);
  });
  child.stdin.end();
  child.kill();
  return res;
}
