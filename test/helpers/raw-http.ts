/**
 * A raw HTTP/1.1 connection for tests that need exact bytes on the wire: pipelined requests,
 * requests in pieces, malformed heads. It collects what the server sends and splits it into
 * responses (Content-Length, chunked, or to the end of a closed connection).
 */
import { connect, type Socket } from 'node:net';
import { request as httpRequest } from 'node:http';

export interface RawResponse {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  /** De-chunked, as UTF-8. */
  body: string;
}

export /** A raw connection that collects what the server sends and splits it into HTTP responses. */
function rawClient(port: number, host = '127.0.0.1') {
  const socket: Socket = connect(port, host);
  const received: Buffer[] = [];
  /** What follows the responses already parsed (each is parsed once: thousands of pipelined answers stay cheap to wait for). */
  let unparsed: Buffer[] = [];
  const out: RawResponse[] = [];
  let closed = false;
  socket.on('data', (d) => {
    received.push(d);
    unparsed.push(d);
  });
  socket.on('close', () => (closed = true));
  socket.on('error', () => undefined);
  /** Complete responses so far: status, lower-case headers, body (de-chunked). */
  const responses = () => {
    let rest = unparsed.length === 1 ? unparsed[0]! : Buffer.concat(unparsed);
    unparsed = [rest];
    for (;;) {
      const end = rest.indexOf('\r\n\r\n');
      if (end < 0) break;
      const lines = rest.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
      let body = rest.subarray(end + 4);
      if (headers['content-length'] !== undefined) {
        const n = Number(headers['content-length']);
        if (body.length < n) break;
        rest = body.subarray(n);
        body = body.subarray(0, n);
      } else if (headers['transfer-encoding'] === 'chunked') {
        const parts: Buffer[] = [];
        let at = 0;
        let done = false;
        for (;;) {
          const eol = body.indexOf('\r\n', at);
          if (eol < 0) break;
          const size = parseInt(body.subarray(at, eol).toString(), 16);
          if (body.length < eol + 2 + size + 2) break;
          if (size === 0) {
            done = true;
            at = eol + 4;
            break;
          }
          parts.push(body.subarray(eol + 2, eol + 2 + size));
          at = eol + 2 + size + 2;
        }
        if (!done) break;
        rest = body.subarray(at);
        body = Buffer.concat(parts);
      } else if (headers.connection === 'close' && closed) {
        rest = Buffer.alloc(0); // no length: the body runs to the end of the connection
      } else break;
      out.push({ status: Number(lines[0]!.split(' ')[1]), headers, body: body.toString('utf8') });
      unparsed = [rest];
    }
    return out.slice();
  };
  return {
    socket,
    responses,
    get closed() {
      return closed;
    },
    send: (text: string | Buffer) => socket.write(text),
    async waitFor(n: number, ms = 5000) {
      const deadline = Date.now() + ms;
      while (responses().length < n) {
        if (Date.now() > deadline) throw new Error(`got ${responses().length} of ${n} responses: ${JSON.stringify(Buffer.concat(received).toString('latin1').slice(0, 4000))}`);
        await new Promise((r) => setTimeout(r, 5));
      }
      return responses();
    },
    async waitClosed(ms = 5000) {
      const deadline = Date.now() + ms;
      while (!closed) {
        if (Date.now() > deadline) throw new Error('connection still open');
        await new Promise((r) => setTimeout(r, 5));
      }
    },
  };
}

/** A request without fetch (which sets Host itself and has no Unix sockets): its status and body. */
export function rawRequest(target: { socketPath: string } | { host: string; port: number }, path: string, method: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ ...target, path, method, headers }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.setTimeout(5_000, () => req.destroy(new Error('no answer')));
    req.end();
  });
}
