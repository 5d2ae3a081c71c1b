import type { IncomingMessage } from 'node:http';

const ABSOLUTE = /^https?:\/\//i;

/**
 * A request whose target is in absolute form (`POST http://127.0.0.1:7410/mcp HTTP/1.1`, as a
 * client configured with a proxy sends it) is read as its origin form, with the target's
 * authority as its Host: a server must accept the absolute form, and take the host from it,
 * not from the Host field (RFC 9112 §3.2.2). So the path routes as usual (it was a 404), and
 * the Host check (DNS rebinding) judges the authority the request named. Origin-form requests,
 * the fast path's only kind, are left as they are.
 */
export function toOriginForm(req: IncomingMessage): void {
  const target = req.url;
  if (target === undefined || target.charCodeAt(0) === 0x2f /* / */ || !ABSOLUTE.test(target)) return;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return; // left as sent: no route takes it
  }
  req.url = `${url.pathname}${url.search}`;
  req.headers.host = url.host;
}
