import { connect } from 'node:net';

/**
 * Whether a TCP connection to `url`'s host and port completes within `ms`: undefined if it does,
 * else why not (refused, timed out, unresolvable). Only the connection: nothing is sent, and a
 * TLS server counts as there once its TCP handshake is done.
 */
export function tcpReachable(url: string, ms: number): Promise<string | undefined> {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (why: string | undefined): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(why);
    };
    const timer = setTimeout(() => done(`a new connection to ${host}:${port} did not complete within ${ms} ms`), ms);
    socket.once('connect', () => done(undefined));
    socket.once('error', (err: NodeJS.ErrnoException) => done(`a new connection to ${host}:${port} failed: ${err.code ?? err.message}`));
  });
}
