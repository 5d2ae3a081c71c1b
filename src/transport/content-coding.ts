/**
 * Content codings of an upstream's answer (RFC 9110 §8.4). The hub asks for none: its upstreams
 * are mostly near it, where compressing small JSON-RPC answers costs both ends CPU for nothing,
 * and a compressing proxy may hold an event stream's progress and keep-alive events in its
 * buffer. A request with no Accept-Encoding at all accepts any coding (§12.5.3), so it says
 * `identity`. Some servers and proxies compress all the same: gzip, deflate and br are decoded;
 * another coding fails the answer with a message naming it (not as a body that is no JSON-RPC).
 */
import { createRequire } from 'node:module';
import type { Transform } from 'node:stream';

/** node:zlib, loaded by the first compressed answer: most hubs never get one, and it costs ~5 ms at start. */
let zlib: typeof import('node:zlib') | undefined;
const loadZlib = (): typeof import('node:zlib') => (zlib ??= createRequire(import.meta.url)('node:zlib') as typeof import('node:zlib'));

/** The Accept-Encoding of every request to an upstream. */
export const ACCEPT_ENCODING = 'identity';

export type Coding = 'gzip' | 'deflate' | 'br';

/**
 * The coding a Content-Encoding names: undefined for none (absent or `identity`), a Coding, or
 * the header's text when the hub cannot decode it (another coding, or several stacked).
 */
export function codingOf(header: string | string[] | undefined): Coding | string | undefined {
  if (header === undefined) return undefined;
  const v = (Array.isArray(header) ? header.join(',') : header).trim().toLowerCase();
  if (v === '' || v === 'identity') return undefined;
  if (v === 'gzip' || v === 'x-gzip') return 'gzip';
  if (v === 'deflate' || v === 'br') return v;
  return v;
}

export function decodable(c: string): c is Coding {
  return c === 'gzip' || c === 'deflate' || c === 'br';
}

/**
 * A decoder for `coding`, chosen on the body's first bytes: `deflate` is the zlib format
 * (RFC 9110 §8.4.1.2), but some servers send the raw deflate stream under that name.
 */
export function decoderFor(coding: Coding, first: Buffer): Transform {
  const z = loadZlib();
  if (coding === 'gzip') return z.createGunzip();
  if (coding === 'br') return z.createBrotliDecompress();
  const zlibHeader = first.length >= 2 && (first[0]! & 0x0f) === 8 && ((first[0]! << 8) | first[1]!) % 31 === 0;
  return zlibHeader ? z.createInflate() : z.createInflateRaw();
}
