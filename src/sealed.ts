import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

/**
 * Values the hub hands to clients and takes back (MRTR `requestState`, legacy session ids):
 * AES-256-GCM sealed JSON, as base64url of iv ‖ tag ‖ ciphertext. Only the hub can read or make
 * one; a changed byte, another key or anything else fails to open.
 */

/** `value`'s JSON sealed with a 32-byte key. */
export function sealJson(key: Buffer, value: unknown): string {
  return sealText(key, JSON.stringify(value));
}

/** A JSON text sealed as sealJson would seal its value (for a caller that has the text already). */
export function sealText(key: Buffer, json: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  const ct = Buffer.concat([c.update(json, 'utf8'), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), ct]).toString('base64url');
}

/** What sealJson sealed with this key; throws for any other text. */
export function openJson(key: Buffer, text: string): unknown {
  const raw = Buffer.from(text, 'base64url');
  const d = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  d.setAuthTag(raw.subarray(12, 28));
  return JSON.parse(Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8'));
}

/** A key of its own for one use of the hub's state key, so no two uses share a key. */
export function deriveKey(stateKey: Buffer, use: string): Buffer {
  return createHmac('sha256', stateKey).update(use).digest();
}
