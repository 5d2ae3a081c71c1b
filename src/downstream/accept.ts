/**
 * Whether an HTTP Accept header takes a media type (RFC 9110 §12.5.1). Media types compare
 * without regard to case (§8.3.1): a client that writes `Text/Event-Stream` can take a stream.
 * The wildcard ranges (any type, any text type) take `text/event-stream` too, and the most
 * specific range that names the type decides its weight, so `text/event-stream;q=0` refuses it
 * even beside a wildcard.
 */
export function acceptsType(header: string, type: string): boolean {
  return weighs(header, type, 0);
}

/**
 * Whether an Accept header names a media type itself, with a weight above zero: not through a
 * wildcard range (any type, any text type), nor by being absent. What a client asks for, not
 * merely what it puts up with.
 */
export function namesType(header: string, type: string): boolean {
  return weighs(header, type, 2);
}

/** Whether the most specific range naming `type` (of at least `least`: 0 any, 1 its family, 2 itself) weighs above zero. */
function weighs(header: string, type: string, least: number): boolean {
  // What the SDK clients send, on every POST: answered without splitting it (a tenth of the time).
  if (COMMON.has(header)) return header.includes(type);
  const t = type.toLowerCase();
  const family = `${t.slice(0, t.indexOf('/'))}/*`;
  let specificity = -1;
  let weight = 0;
  for (const part of header.split(',')) {
    const semi = part.indexOf(';');
    const range = (semi < 0 ? part : part.slice(0, semi)).trim().toLowerCase();
    const s = range === t ? 2 : range === family ? 1 : range === '*/*' ? 0 : -1;
    if (s < 0 || s < specificity) continue;
    const q = semi < 0 ? 1 : qualityOf(part.slice(semi + 1));
    // Two ranges as specific (the type listed twice): the higher weight is the client's intent.
    weight = s > specificity ? q : Math.max(weight, q);
    specificity = s;
  }
  return specificity >= least && weight > 0;
}

/** The `q` parameter of a media range's parameters; 1 when absent or unreadable (taken, as before it was read at all). */
function qualityOf(params: string): number {
  for (const p of params.split(';')) {
    const eq = p.indexOf('=');
    if (eq < 0 || p.slice(0, eq).trim().toLowerCase() !== 'q') continue;
    const q = Number(p.slice(eq + 1).trim());
    return Number.isFinite(q) && q >= 0 && q <= 1 ? q : 1;
  }
  return 1;
}

const COMMON = new Set(['application/json, text/event-stream', 'text/event-stream, application/json', 'text/event-stream', 'application/json']);
