/**
 * DNS-rebinding defence: the Host must name this listener and a present Origin must be allowed.
 * On loopback, loopback names and origins are always allowed.
 */
import { isIPv4, isIPv6 } from 'node:net';

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/**
 * A loopback name or address. Only an IPv4 address counts for 127.0.0.0/8: a DNS name such as
 * `127.evil.example` is anyone's, and would let a rebinding page through.
 */
export function isLoopbackHost(host: string): boolean {
  return LOOPBACK.has(host) || (host.startsWith('127.') && isIPv4(host));
}

/**
 * The host of a Host header (lower-cased), or undefined unless the header is just a host and an
 * optional `:port` (RFC 9110 §7.2): a check that cut `[::1]x.evil.com` at the `]` would take it
 * for loopback.
 */
function hostname(hostHeader: string): string | undefined {
  const h = /^(\[[^\]]+\]|[^[\]:]+)(?::\d*)?$/.exec(hostHeader)?.[1];
  if (h === undefined || !h.startsWith('[')) return h?.toLowerCase();
  const bare = h.slice(1, -1);
  return isIPv6(bare) ? ipv6Form(bare) : undefined; // `[…]` holds an IPv6 address or nothing
}

/**
 * A configured host as a Host header names it: lower case, and an IPv6 address in brackets and
 * in its shortest form (`listen.host: "2001:DB8:0::1"` is `[2001:db8::1]` on the wire).
 */
function sameForm(host: string): string {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  return isIPv6(bare) ? ipv6Form(bare) : host.toLowerCase();
}

/** An IPv6 address (no brackets) as a URL writes it: bracketed, lower case, shortest form. */
const ipv6Form = (bare: string): string => new URL(`http://[${bare}]/`).hostname;

export interface OriginPolicy {
  listenHost: string;
  allowedOrigins: readonly string[];
}

export function hostAllowed(hostHeader: string | undefined, p: OriginPolicy): boolean {
  const h = hostHeader && hostname(hostHeader);
  if (!h) return false;
  if (isLoopbackHost(h)) return true;
  if (h === sameForm(p.listenHost)) return true;
  return p.allowedOrigins.some((o) => {
    try {
      return new URL(o).hostname.toLowerCase() === h;
    } catch {
      return false;
    }
  });
}

export function originAllowed(origin: string | undefined, p: OriginPolicy): boolean {
  if (origin === undefined) return true; // non-browser clients send none
  if (p.allowedOrigins.includes(origin)) return true;
  try {
    const u = new URL(origin);
    return (u.protocol === 'http:' || u.protocol === 'https:') && isLoopbackHost(u.hostname) && isLoopbackHost(p.listenHost);
  } catch {
    return false;
  }
}

/**
 * The admin routes (the live feed's WebSocket, reload, restart, tickets) take a browser's
 * request only from a page of this hub (its Origin names the Host it was sent to) or of an
 * origin `listen.allowedOrigins` lists. Any loopback origin will not do here: a WebSocket and
 * a form POST need no CORS, so a page on another local port could otherwise read the live feed
 * and restart servers of a hub that runs without authentication. Non-browser clients send no
 * Origin.
 */
export function adminOriginAllowed(origin: string | undefined, hostHeader: string | undefined, p: OriginPolicy): boolean {
  if (origin === undefined) return true;
  if (p.allowedOrigins.includes(origin)) return true;
  try {
    const u = new URL(origin);
    return (u.protocol === 'http:' || u.protocol === 'https:') && hostHeader !== undefined && u.host === new URL(`${u.protocol}//${hostHeader}`).host;
  } catch {
    return false;
  }
}
