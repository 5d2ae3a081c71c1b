import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { expect } from 'vitest';
import type { HubProcess } from './hub-process.js';

/**
 * Has the real hub read two things in one turn of its event loop, in this order: what one of its
 * upstream processes answered, then an HTTP request on a connection it accepted before. The hub
 * is stopped (SIGSTOP) while both arrive, so that its next poll of its files finds both ready, in
 * the order they came (epoll's ready list keeps the order of arrival, and libuv runs their
 * callbacks in it): what the answer leads to without waiting for another turn runs before the
 * request's handler, and what waits for the turn's end (the ledger's commit of its rows) after it.
 *
 * `release` lets the upstream answer; `answered` resolves once the answer is in the hub's pipe
 * (the mutable fixture's GATE_SAID). `request` is the raw HTTP/1.1 request (keep-alive); its
 * response's status line is returned.
 */
export async function inOneTurn(hub: HubProcess, release: () => void, answered: () => Promise<unknown>, request: string): Promise<string> {
  const socket = await keptConnection(hub.port);
  // A level-triggered epoll keeps a file it returned in its ready list until its next wait looks
  // again: the kept connection, just answered, would be found (and read) before a pipe that got
  // its data earlier. A request on another connection has the hub wait again first.
  expect((await fetch(new URL('/healthz', hub.url))).status).toBe(200);
  try {
    const pid = hub.proc.pid!;
    process.kill(pid, 'SIGSTOP');
    try {
      await expect.poll(() => stateOf(pid), { timeout: 5000, interval: 5 }).toBe('T');
      release();
      await answered();
      await new Promise<void>((resolve, reject) => socket.write(request, (err) => (err ? reject(err) : resolve())));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    return (await responseOn(socket)).split('\r\n')[0]!;
  } finally {
    socket.destroy();
  }
}

/** The raw request for `servers restart ID` (the admin API on the hub's listener). */
export function restartRequest(id: string): string {
  return `POST /admin/servers/${encodeURIComponent(id)}/restart HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n`;
}

/** A connection to the hub that it has accepted and answered on (a /healthz), kept open. */
async function keptConnection(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  const status = (await responseOn(socket)).split('\r\n')[0];
  expect(status).toMatch(/^HTTP\/1\.1 200/);
  return socket;
}

/** The next whole response on `socket` (its head, and a body of its Content-Length). */
function responseOn(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const onData = (d: Buffer): void => {
      got += d.toString('latin1');
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(got.slice(0, end))?.[1] ?? 0);
      if (got.length - end - 4 < length) return;
      socket.off('data', onData).off('error', reject);
      resolve(got);
    };
    socket.on('data', onData).once('error', reject);
  });
}

/** A process's state letter (/proc/PID/stat): 'T' once it is stopped. */
function stateOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}
