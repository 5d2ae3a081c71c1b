import { createHmac, randomBytes, timingSafeEqual, type BinaryLike, type KeyObject } from 'node:crypto';
import { deriveKey } from '../sealed.js';

/**
 * Hub-owned pagination cursors. Opaque to clients (base64url of `offset:snapshot` followed by
 * a truncated HMAC-SHA256), so a client can neither forge an offset nor reuse a cursor from
 * another key; `snapshot` names the list version so a cursor into an older list is detected.
 */
export interface Cursor {
  /** Index of the first item of the page. */
  offset: number;
  /** Short id of the list version the offset refers to. */
  snapshot: string;
}

export type CursorKey = BinaryLike | KeyObject;

/**
 * The hub's cursor key, from its requestState key (kept beside the ledger, or configured): a
 * restarted hub, and every hub given the same key, accepts the cursors of the others. A key of
 * its own, so that no cursor MAC is ever one made with the sealing key.
 */
export function cursorKeyFrom(stateKey: Buffer): Buffer {
  return deriveKey(stateKey, 'switchyard list cursor key v1');
}

/** Cursors die with the process unless the caller passes a key of its own. */
const PROCESS_KEY = randomBytes(32);
const MAC_BYTES = 16;
const MAX_SNAPSHOT_BYTES = 256;
const MAX_PAYLOAD_BYTES = String(Number.MAX_SAFE_INTEGER).length + 1 + MAX_SNAPSHOT_BYTES;
// Longest encoding of the largest payload; anything longer is rejected before decoding.
const MAX_CURSOR_CHARS = Math.ceil(((MAX_PAYLOAD_BYTES + MAC_BYTES) * 4) / 3);
const PAYLOAD = /^(0|[1-9][0-9]{0,15}):(.*)$/s;

function mac(payload: Buffer, key: CursorKey): Buffer {
  return createHmac('sha256', key).update(payload).digest().subarray(0, MAC_BYTES);
}

/** Throws RangeError for a negative/non-integer offset or an over-long snapshot (caller bugs). */
export function encodeCursor(cursor: Cursor, key: CursorKey = PROCESS_KEY): string {
  if (!Number.isSafeInteger(cursor.offset) || cursor.offset < 0) {
    throw new RangeError(`cursor offset must be a non-negative integer, got ${cursor.offset}`);
  }
  const payload = Buffer.from(`${cursor.offset}:${cursor.snapshot}`, 'utf8');
  if (payload.length > MAX_PAYLOAD_BYTES) throw new RangeError('cursor snapshot too long');
  return Buffer.concat([payload, mac(payload, key)]).toString('base64url');
}

/** The cursor, or null for anything not made by encodeCursor with this key (answer -32602). */
export function decodeCursor(s: unknown, key: CursorKey = PROCESS_KEY): Cursor | null {
  if (typeof s !== 'string' || s.length === 0 || s.length > MAX_CURSOR_CHARS) return null;
  if (!/^[A-Za-z0-9_-]+$/.test(s)) return null;
  const buf = Buffer.from(s, 'base64url');
  // Only the canonical spelling: no second string may name the same cursor.
  if (buf.length <= MAC_BYTES || buf.toString('base64url') !== s) return null;
  const payload = buf.subarray(0, buf.length - MAC_BYTES);
  if (!timingSafeEqual(mac(payload, key), buf.subarray(buf.length - MAC_BYTES))) return null;
  const m = PAYLOAD.exec(payload.toString('utf8'));
  if (!m) return null;
  const offset = Number(m[1]);
  return Number.isSafeInteger(offset) ? { offset, snapshot: m[2] } : null;
}
