/**
 * The fast path's head parser as it was before its header table was reworked (issue #9), kept
 * unchanged as the reference the current one is checked against over generated heads
 * (test/unit/transport-http1-head.test.ts): same verdicts, same headers, byte for byte.
 */
import type { HeadResult } from '../../src/transport/http1/head.js';

const CRLF2 = Buffer.from('\r\n\r\n');
const POST_SLASH = Buffer.from('POST /');
const TOO_LONG_FOR_LENGTH = 15;

// Byte classes, looked up per character: a scan of the head costs less than a regular
// expression per line (measured on a typical client's head: 5.2 µs → 2.4 µs, most of what is
// left being the headers object).
const TOKEN_CHAR = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN_CHAR[c.charCodeAt(0)] = 1;
// Field values: visible characters, blanks and obs-text; no other control characters.
const VALUE_CHAR = new Uint8Array(256);
for (let c = 0x20; c < 0x100; c++) VALUE_CHAR[c] = c === 0x7f ? 0 : 1;
VALUE_CHAR[0x09] = 1;
// A request target: visible ASCII.
const TARGET_CHAR = new Uint8Array(256);
for (let c = 0x21; c < 0x7f; c++) TARGET_CHAR[c] = 1;

const SP = 0x20;
const HTAB = 0x09;
const CR = 0x0d;

/**
 * Parse the request starting at `buf[0]`. `maxHeadBytes` bounds the head (node:http's
 * `maxHeaderSize`, so a larger one goes there and gets its 431); `wants(path)` says which paths
 * the fast path serves.
 */
export function referenceParseHead(buf: Buffer, maxHeadBytes: number, wants: (path: string) => boolean): HeadResult {
  const end = buf.indexOf(CRLF2);
  // A head whose lines end in a bare LF never has CRLFCRLF: node:http answers it (400) at once.
  // So do bytes that cannot begin a head the fast path takes (a body longer than its
  // Content-Length said, another method): waiting for a CRLFCRLF that may never come held such
  // a connection, silent, for the whole request timeout.
  if (end < 0) return buf.length > maxHeadBytes || !startsLikePost(buf) || hasBareLf(buf) ? 'other' : 'incomplete';
  if (end > maxHeadBytes) return 'other';
  const text = buf.toString('latin1', 0, end + 2); // every line, the last one's CRLF included
  if (!text.startsWith('POST /')) return 'other';
  const lineEnd = text.indexOf('\r\n');
  if (lineEnd < 15 || text.slice(lineEnd - 9, lineEnd) !== ' HTTP/1.1') return 'other';
  const targetEnd = lineEnd - 9;
  let q = -1;
  for (let i = 5; i < targetEnd; i++) {
    const c = text.charCodeAt(i);
    if (TARGET_CHAR[c] !== 1) return 'other';
    if (c === 0x3f && q < 0) q = i;
  }
  const url = text.slice(5, targetEnd);
  const path = q < 0 ? url : text.slice(5, q);
  if (!wants(path)) return 'other';
  // A plain object, as node:http's: a name like 'constructor' is found on the prototype and sent to node:http.
  const headers: Record<string, string> = {};
  let i = lineEnd + 2;
  while (i < text.length) {
    const start = i;
    while (TOKEN_CHAR[text.charCodeAt(i)] === 1) i++;
    if (i === start || text.charCodeAt(i) !== 0x3a) return 'other'; // no name, or not followed by ':'
    const key = text.slice(start, i).toLowerCase();
    i++;
    while (text.charCodeAt(i) === SP || text.charCodeAt(i) === HTAB) i++;
    const from = i;
    let to = i; // after the last non-blank
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === CR) break;
      if (VALUE_CHAR[c] !== 1) return 'other'; // a control character, a bare LF, or past the end
      i++;
      if (c !== SP && c !== HTAB) to = i;
    }
    if (text.charCodeAt(i + 1) !== 0x0a) return 'other'; // a bare CR
    // llhttp ends a Content-Length or Connection value at a trailing HTAB differently (400 for the
    // length, "not close" for Connection) while it trims a space: such a head is its to read.
    if (to < i && (key === 'content-length' || key === 'connection') && text.slice(to, i).includes('\t')) return 'other';
    i += 2;
    if (headers[key] !== undefined) return 'other';
    headers[key] = text.slice(from, to);
  }
  if (headers.host === undefined) return 'other';
  if (headers['transfer-encoding'] !== undefined || headers.expect !== undefined || headers.upgrade !== undefined) return 'other';
  const length = headers['content-length'];
  if (length === undefined || length.length === 0 || length.length > TOO_LONG_FOR_LENGTH) return 'other';
  for (let k = 0; k < length.length; k++) {
    const c = length.charCodeAt(k);
    if (c < 0x30 || c > 0x39) return 'other';
  }
  const connection = headers.connection === undefined ? undefined : headers.connection.toLowerCase();
  if (connection !== undefined && connection !== 'keep-alive' && connection !== 'close') return 'other';
  return { method: 'POST', url, path, headers, contentLength: Number(length), close: connection === 'close', headBytes: end + 4 };
}

/** Whether `buf` begins as `POST /` does, as far as it goes. */
function startsLikePost(buf: Buffer): boolean {
  const n = Math.min(buf.length, POST_SLASH.length);
  return buf.compare(POST_SLASH, 0, n, 0, n) === 0;
}

/** Whether some LF in `buf` does not follow a CR. */
function hasBareLf(buf: Buffer): boolean {
  for (let i = buf.indexOf(0x0a); i >= 0; i = buf.indexOf(0x0a, i + 1)) if (i === 0 || buf[i - 1] !== CR) return true;
  return false;
}
