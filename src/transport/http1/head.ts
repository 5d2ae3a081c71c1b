/**
 * The head of one HTTP/1.1 request, parsed for the edge's fast path. It accepts a strict subset
 * only (a POST with a Content-Length body, CRLF line ends, token header names, no header twice,
 * no Transfer-Encoding, Expect or Upgrade); everything else is answered "other" and the
 * connection goes to node:http, whose parser then reads the same bytes from the start. So the
 * two parsers never disagree on where a request ends: whatever the subset accepts, llhttp would
 * read the same way.
 */
export interface RequestHead {
  readonly method: 'POST';
  /** The request target as sent (origin form: path and query). */
  readonly url: string;
  /** The path, without the query. */
  readonly path: string;
  /** Lower-case names; values as sent (latin1, as node:http gives them), without surrounding blanks. */
  readonly headers: Record<string, string>;
  readonly contentLength: number;
  /** The client sent `Connection: close`. */
  readonly close: boolean;
  /** Bytes of the head, the blank line included: the body starts here. */
  readonly headBytes: number;
}

export type HeadResult = RequestHead | 'incomplete' | 'other';

const POST_SLASH = Buffer.from('POST /');
const TOO_LONG_FOR_LENGTH = 15;

/**
 * The whole head as the subset takes it, up to the blank line: `POST`, an origin-form
 * target of visible ASCII, `HTTP/1.1`; then lines of a token name, ':' and a value of visible
 * characters, blanks and obs-text (no other control character, so no bare CR or LF), each ending
 * in CRLF. Every class excludes CR, so the expression never backtracks into a line, and where it
 * matches it ends at the first CRLFCRLF: no line can begin with CR.
 */
const HEAD_SYNTAX = /^POST \/[\x21-\x7e]* HTTP\/1\.1\r\n(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*\r\n)*\r\n/;

const SP = 0x20;
const HTAB = 0x09;
const CR = 0x0d;

// Names clients send and the hub reads, matched in place (any case) and stored under their
// literal by storeKnown (which lists them in the same order): no substring and no lower-casing
// per name, and no keyed load or store with a string sliced from the head, which V8 interns
// first (callgrind, issue #9: 23.8k → 17.6k instructions a request). The first six are the ones
// the subset turns on; each name's place is its bit in `seen`.
const KNOWN = [
  'host',
  'content-length',
  'connection',
  'transfer-encoding',
  'expect',
  'upgrade',
  'content-type',
  'accept',
  'accept-encoding',
  'authorization',
  'origin',
  'user-agent',
  'mcp-protocol-version',
  'mcp-session-id',
  'mcp-method',
  'mcp-name',
  'last-event-id',
] as const;
const HOST = 1 << 0;
const CONTENT_LENGTH = 1 << 1;
const CONNECTION = 1 << 2;
const NOT_THE_SUBSET = (1 << 3) | (1 << 4) | (1 << 5); // Transfer-Encoding, Expect, Upgrade
/** The places in KNOWN of the names of each length. */
const KNOWN_BY_LENGTH: number[][] = [];
for (let k = 0; k < KNOWN.length; k++) (KNOWN_BY_LENGTH[KNOWN[k]!.length] ??= []).push(k);

/**
 * The place in KNOWN of the name in `buf[start, end)`, or -1. The name is all token characters and
 * every known name lower-case letters and '-', so setting the 0x20 bit folds the case exactly:
 * no other token character becomes a letter or '-' by it (CR would become '-', but is no token).
 */
function knownName(buf: Buffer, start: number, end: number): number {
  const places = KNOWN_BY_LENGTH[end - start];
  if (places === undefined) return -1;
  const first = buf[start]! | 0x20;
  next: for (let p = 0; p < places.length; p++) {
    const k = places[p]!;
    const known = KNOWN[k]!;
    if (known.charCodeAt(0) !== first) continue;
    for (let j = 1; j < known.length; j++) if ((buf[start + j]! | 0x20) !== known.charCodeAt(j)) continue next;
    return k;
  }
  return -1;
}

/**
 * `headers[KNOWN[k]] = value`, with a store of its own for each name: a client sends its headers
 * in one order, so each store meets one shape of the object and V8 adds the property inline,
 * where one store for every name meets every shape and goes the slow, megamorphic way.
 */
function storeKnown(headers: Record<string, string>, k: number, value: string): void {
  switch (k) {
    case 0:
      headers['host'] = value;
      return;
    case 1:
      headers['content-length'] = value;
      return;
    case 2:
      headers['connection'] = value;
      return;
    case 3:
      headers['transfer-encoding'] = value;
      return;
    case 4:
      headers['expect'] = value;
      return;
    case 5:
      headers['upgrade'] = value;
      return;
    case 6:
      headers['content-type'] = value;
      return;
    case 7:
      headers['accept'] = value;
      return;
    case 8:
      headers['accept-encoding'] = value;
      return;
    case 9:
      headers['authorization'] = value;
      return;
    case 10:
      headers['origin'] = value;
      return;
    case 11:
      headers['user-agent'] = value;
      return;
    case 12:
      headers['mcp-protocol-version'] = value;
      return;
    case 13:
      headers['mcp-session-id'] = value;
      return;
    case 14:
      headers['mcp-method'] = value;
      return;
    case 15:
      headers['mcp-name'] = value;
      return;
    case 16:
      headers['last-event-id'] = value;
      return;
  }
}

/** Whether `value` is `word` (lower-case ASCII letters and '-') in any case, as `value.toLowerCase() === word`. */
function isWord(value: string, word: string): boolean {
  if (value.length !== word.length) return false;
  for (let j = 0; j < word.length; j++) {
    const w = word.charCodeAt(j);
    const c = value.charCodeAt(j);
    if (w === 0x2d ? c !== w : (c | 0x20) !== w) return false;
  }
  return true;
}

/**
 * Parse the request starting at `buf[0]`. `maxHeadBytes` bounds the head (node:http's
 * `maxHeaderSize`, so a larger one goes there and gets its 431); `wants(path)` says which paths
 * the fast path serves.
 */
export function parseHead(buf: Buffer, maxHeadBytes: number, wants: (path: string) => boolean): HeadResult {
  // The head is looked for in a string of the bytes a head within the limit can take up (node's
  // Buffer#indexOf costs a call into C++ on top of the copy made below anyway).
  const text = buf.toString('latin1', 0, Math.min(buf.length, maxHeadBytes + 4));
  const end = text.indexOf('\r\n\r\n');
  // A head whose lines end in a bare LF never has CRLFCRLF: node:http answers it (400) at once.
  // So do bytes that cannot begin a head the fast path takes (a body longer than its
  // Content-Length said, another method): waiting for a CRLFCRLF that may never come held such
  // a connection, silent, for the whole request timeout.
  if (end < 0) return buf.length > maxHeadBytes || !startsLikePost(buf) || hasBareLf(buf) ? 'other' : 'incomplete';
  if (end > maxHeadBytes) return 'other';
  const stop = end + 2; // every line, the last one's CRLF included
  // The subset's syntax checked in one pass of a compiled expression, where a scan of the bytes in
  // JavaScript paid a map and a bounds check per byte and table (issue #9); the lines are then
  // split by the string builtins' searches without looking at each byte again.
  if (!HEAD_SYNTAX.test(text)) return 'other';
  const lineEnd = text.indexOf('\r\n');
  const url = text.slice(5, lineEnd - 9);
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (!wants(path)) return 'other';
  // A plain object, as node:http's: a name like 'constructor' is found on the prototype and sent to node:http.
  const headers: Record<string, string> = {};
  let seen = 0; // the known names met, by their bit
  let length: string | undefined;
  let connection: string | undefined;
  let i = lineEnd + 2;
  while (i < stop) {
    const start = i;
    i = text.indexOf(':', start);
    const k = knownName(buf, start, i);
    const bit = k < 0 ? 0 : 1 << k;
    const key = k >= 0 ? KNOWN[k]! : text.slice(start, i).toLowerCase();
    i++;
    const cr = text.indexOf('\r', i);
    while (i < cr && (buf[i]! === SP || buf[i]! === HTAB)) i++;
    const from = i;
    let to = cr; // after the last non-blank
    while (to > from && (buf[to - 1]! === SP || buf[to - 1]! === HTAB)) to--;
    // llhttp ends a Content-Length or Connection value at a trailing HTAB differently (400 for the
    // length, "not close" for Connection) while it trims a space: such a head is its to read.
    if (to < cr && bit & (CONTENT_LENGTH | CONNECTION) && text.slice(to, cr).includes('\t')) return 'other';
    i = cr + 2;
    // A known name twice is seen by its bit; any other is no known name in any case, so only
    // the object (and its prototype) can have it.
    if (bit !== 0 ? (seen & bit) !== 0 : headers[key] !== undefined) return 'other';
    seen |= bit;
    const value = text.slice(from, to);
    if (k < 0) headers[key] = value;
    else {
      storeKnown(headers, k, value);
      if (bit === CONTENT_LENGTH) length = value;
      else if (bit === CONNECTION) connection = value;
    }
  }
  if ((seen & HOST) === 0 || (seen & NOT_THE_SUBSET) !== 0) return 'other';
  if (length === undefined || length.length === 0 || length.length > TOO_LONG_FOR_LENGTH) return 'other';
  // At most 15 digits: the sum stays an exact integer, as Number(length) gives.
  let contentLength = 0;
  for (let k = 0; k < length.length; k++) {
    const c = length.charCodeAt(k);
    if (c < 0x30 || c > 0x39) return 'other';
    contentLength = contentLength * 10 + (c - 0x30);
  }
  const close = connection !== undefined && isWord(connection, 'close');
  if (connection !== undefined && !close && !isWord(connection, 'keep-alive')) return 'other';
  return { method: 'POST', url, path, headers, contentLength, close, headBytes: end + 4 };
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
