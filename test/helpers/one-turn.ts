import { expect } from 'vitest';
import type { HubProcess } from './hub-process.js';
import { processState } from './procs.js';
import { rawClient } from './raw-http.js';

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
 * response's status is returned.
 */
export async function inOneTurn(hub: HubProcess, release: () => void, answered: () => Promise<unknown>, request: string): Promise<number> {
  // A connection the hub has accepted and answered on (a /healthz), kept open.
  const kept = rawClient(hub.port);
  try {
    kept.send('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    expect((await kept.waitFor(1, 30_000))[0]!.status).toBe(200);
    // A level-triggered epoll keeps a file it returned in its ready list until its next wait looks
    // again: the kept connection, just answered, would be found (and read) before a pipe that got
    // its data earlier. A request on another connection has the hub wait again first.
    expect((await fetch(new URL('/healthz', hub.url))).status).toBe(200);
    const pid = hub.proc.pid!;
    process.kill(pid, 'SIGSTOP');
    try {
      await expect.poll(() => processState(pid), { timeout: 5000, interval: 5 }).toBe('T');
      release();
      await answered();
      await new Promise<void>((resolve, reject) => kept.socket.write(request, (err) => (err ? reject(err) : resolve())));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    return (await kept.waitFor(2, 30_000))[1]!.status;
  } finally {
    kept.socket.destroy();
  }
}

/** The raw request for `servers restart ID` (the admin API on the hub's listener). */
export function restartRequest(id: string): string {
  return `POST /admin/servers/${encodeURIComponent(id)}/restart HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n`;
}
