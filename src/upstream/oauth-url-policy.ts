/**
 * Where the hub's OAuth clients may be sent by what an upstream says (SSRF, the spec's security
 * best practices; RFC 9728 §7.7). The URLs of discovery come from the server: the challenge's
 * `resource_metadata`, the authorization servers its metadata lists, their endpoints (token,
 * registration, revocation) and any redirect met on the way. A server that could name any URL
 * would have the hub request a cloud metadata service (169.254.169.254), a service on the hub's
 * own host or private network, or anything over plain http.
 *
 * The rule: a URL on the configured server's host, or on `oauth.issuer`'s (the operator named
 * both), is taken as it is, over https or the scheme the operator wrote for that host (not plain
 * http named by an https server: metadata read in clear could be rewritten on the way to name
 * another authorization server). Any other must be https (plain http on loopback only), and every
 * address its host resolves to must be public, or of the same kind as the configured server's
 * own (a server on loopback may name loopback ones, a server on a private network private ones:
 * it could reach them anyway). Link-local and cloud metadata addresses, and reserved ones
 * (0.0.0.0, multicast), are never taken unless the server itself is on one. What else is needed
 * (an authorization server on a private network for a public server) is trusted by naming it in
 * `oauth.issuer`.
 *
 * The addresses are resolved before the request, for the error; the request's own connection
 * (OAuthUrlPolicy.fetch) checks the addresses it connects to again, so that a DNS answer that
 * changes in between (DNS rebinding) is caught too.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { Agent } from 'undici';
import { isLoopbackHost } from '../downstream/origin.js';

type Kind = 'public' | 'loopback' | 'private' | 'link-local' | 'reserved';

const ranges: [Exclude<Kind, 'public'>, BlockList][] = [
  ['link-local', list([['169.254.0.0', 16], ['100.100.100.200', 32], ['fe80::', 10], ['fd00:ec2::254', 128]])],
  ['loopback', list([['127.0.0.0', 8], ['::1', 128]])],
  ['private', list([['10.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16], ['100.64.0.0', 10], ['fc00::', 7]])],
  [
    'reserved',
    list([['0.0.0.0', 8], ['192.0.0.0', 24], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4], ['::', 128], ['ff00::', 8], ['100::', 64], ['2001:db8::', 32]]),
  ],
];

function list(subnets: [string, number][]): BlockList {
  const b = new BlockList();
  for (const [net, prefix] of subnets) b.addSubnet(net, prefix, isIP(net) === 6 ? 'ipv6' : 'ipv4');
  return b;
}

/** What kind of address `ip` is (an IPv4 address mapped into IPv6, or NAT64's, as that IPv4 address). */
export function addressKind(ip: string): Kind {
  const v4 = embeddedIpv4(ip);
  const [addr, type] = v4 !== undefined ? [v4, 'ipv4' as const] : [ip, isIP(ip) === 6 ? ('ipv6' as const) : ('ipv4' as const)];
  for (const [kind, b] of ranges) if (b.check(addr, type)) return kind;
  return 'public';
}

/** The IPv4 address inside ::ffff:a.b.c.d (or its hex form) and 64:ff9b::/96, if `ip` is one. */
function embeddedIpv4(ip: string): string | undefined {
  if (isIP(ip) !== 6) return undefined;
  const m = /^(?:::ffff:|64:ff9b::)(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/i.exec(ip);
  if (!m) return undefined;
  if (m[1] !== undefined) return m[1];
  const hi = parseInt(m[2]!, 16);
  const lo = parseInt(m[3]!, 16);
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}

/** The addresses a URL host stands for: itself when an IP literal, else what it resolves to. */
async function addressesOf(hostname: string): Promise<string[]> {
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  if (isIP(host) !== 0) return [host];
  return (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
}

/** The hosts the operator named, and the kinds of address the configured server is on (resolved once, when first needed). */
export class OAuthUrlPolicy {
  /** Host → the schemes the operator wrote for it (https always). */
  private readonly trusted = new Map<string, Set<string>>();
  private serverKinds: Set<Kind> | undefined;
  /** undici's, connecting only to allowed addresses (made at the first fetch). */
  private agent: Agent | undefined;

  constructor(
    private readonly serverUrl: string,
    issuer: string | undefined,
  ) {
    for (const named of issuer !== undefined ? [serverUrl, issuer] : [serverUrl]) {
      try {
        const u = new URL(named);
        const host = u.hostname.toLowerCase();
        this.trusted.set(host, new Set([...(this.trusted.get(host) ?? ['https:']), u.protocol]));
      } catch {
        // Not a URL: trusts nothing.
      }
    }
  }

  /** Why the hub does not request `url`, which the upstream (or its authorization server) named; undefined when it may. */
  async refusal(url: string): Promise<string | undefined> {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return 'not a URL';
    }
    if (u.protocol !== 'https:' && u.protocol !== 'http:') return `${u.protocol} is not http(s)`;
    if (this.trusted.get(u.hostname.toLowerCase())?.has(u.protocol)) return undefined;
    let addrs: string[];
    try {
      addrs = await addressesOf(u.hostname);
    } catch (err) {
      return `its host does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
    }
    const bad = this.badAddress(addrs, await this.kinds());
    if (bad !== undefined) return bad;
    if (u.protocol === 'http:' && !isLoopbackHost(u.hostname)) return "plain http to a host other than the server's, oauth.issuer's or loopback";
    return undefined;
  }

  /**
   * fetch (a URL refusal() let pass), its connection held to the same rule: the addresses it
   * connects to are checked as resolved for it, not as they were a moment before.
   */
  async fetch(url: string, init: RequestInit): Promise<Response> {
    const u = await (undici ??= import('undici'));
    this.agent ??= new u.Agent({ connect: { lookup: this.lookup } });
    return (await u.fetch(url, { ...(init as object), dispatcher: this.agent })) as unknown as Response;
  }

  /** The resolver of the fetch's connections: a host the operator named is taken as it resolves, any other only to allowed addresses. */
  private readonly lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...(options as LookupOptions), all: true }, (err, addrs: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const bad = this.trusted.has(hostname.toLowerCase()) ? undefined : this.badAddress(addrs.map((a) => a.address), this.serverKinds ?? new Set(['public']));
      if (bad !== undefined) return callback(new Error(`not connected: ${bad}`), '', 0);
      if ((options as LookupOptions).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addrs);
      callback(null, addrs[0]!.address, addrs[0]!.family);
    });
  };

  /** Why one of `addrs` may not be asked, the server being on addresses of `server`'s kinds; undefined when all may. */
  private badAddress(addrs: string[], server: Set<Kind>): string | undefined {
    for (const a of addrs) {
      const kind = addressKind(a);
      if (kind !== 'public' && !server.has(kind))
        return `${a} is a ${kind} address and the server is not on one (the host of oauth.issuer, when set, is trusted)`;
    }
    return undefined;
  }

  private async kinds(): Promise<Set<Kind>> {
    if (this.serverKinds === undefined) {
      try {
        this.serverKinds = new Set((await addressesOf(hostOf(this.serverUrl))).map(addressKind));
      } catch {
        // Not resolvable now: taken as a public server (the strictest), and resolved again next time.
        return new Set<Kind>(['public']);
      }
    }
    return this.serverKinds;
  }
}

let undici: Promise<typeof import('undici')> | undefined;

function hostOf(url: string): string {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return '';
  }
}
