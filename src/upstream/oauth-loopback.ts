/**
 * The loopback redirect of `switchyard login` (RFC 8252 §7.3): an HTTP listener on 127.0.0.1
 * (a free port unless one is configured) that takes the authorization server's one redirect to
 * /callback and answers the browser with a short page. The first callback carrying our `state`
 * settles it; anything else is answered 404 (or 400) and waited past, so a stray request from
 * another local program cannot end the login.
 */
import { createServer, type Server } from 'node:http';

export interface Callback {
  /** The redirect's query (code, state, iss, error, error_description). */
  params: URLSearchParams;
}

export interface LoopbackRedirect {
  /** http://127.0.0.1:<port>/callback */
  redirectUri: string;
  /** The callback with our state, or a timeout. */
  callback: Promise<Callback>;
  close(): void;
}

const PAGE = (text: string): string =>
  `<!doctype html><meta charset="utf-8"><title>switchyard login</title><p>${text}</p>`;

export async function listenForRedirect(state: string, timeoutMs: number, port = 0): Promise<LoopbackRedirect> {
  let settle!: (c: Callback) => void;
  let fail!: (e: Error) => void;
  const callback = new Promise<Callback>((resolve, reject) => {
    settle = resolve;
    fail = reject;
  });
  // The caller awaits it only after opening the browser; a timeout before that is not unhandled.
  callback.catch(() => undefined);
  let done = false;
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method !== 'GET' || u.pathname !== '/callback' || done) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (u.searchParams.get('state') !== state) {
      res.writeHead(400, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE('This is not the login switchyard is waiting for (state mismatch).'));
      return;
    }
    done = true;
    const ok = u.searchParams.has('code') && !u.searchParams.has('error');
    res
      .writeHead(ok ? 200 : 400, { 'content-type': 'text/html; charset=utf-8', connection: 'close' })
      .end(PAGE(ok ? 'switchyard received the authorization. You can close this window.' : 'The authorization was not granted; switchyard says why in the terminal.'));
    settle({ params: u.searchParams });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  const bound = typeof addr === 'object' && addr !== null ? addr.port : port;
  // setTimeout takes at most 2^31-1 ms and fires at once past it (a --timeout of 25 days or more).
  const timer = setTimeout(() => fail(new Error(`no authorization arrived within ${Math.round(timeoutMs / 1000)} s`)), Math.min(timeoutMs, 2 ** 31 - 1));
  timer.unref();
  return {
    redirectUri: `http://127.0.0.1:${bound}/callback`,
    callback,
    close: () => {
      clearTimeout(timer);
      server.closeAllConnections();
      server.close();
    },
  };
}
