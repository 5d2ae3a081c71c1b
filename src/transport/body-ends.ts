/**
 * The two ends of a message too large to be read whole (an HTTP body past `listen.maxBodyBytes`,
 * a stdio line past it), kept as it drains: enough for its top-level keys at either end — that
 * it is a response, and the id it answers or carries (downstream/oversize-body.ts) — whatever
 * its middle holds.
 */

/** Bytes kept at each end: the keys and id of a message fit, whatever its result or params hold. */
const END_BYTES = 512;

export class BodyEnds {
  private headBuf = Buffer.alloc(0);
  private tailBuf = Buffer.alloc(0);

  add(chunk: Buffer): void {
    if (this.headBuf.length < END_BYTES) this.headBuf = Buffer.concat([this.headBuf, chunk.subarray(0, END_BYTES - this.headBuf.length)]);
    const joined = Buffer.concat([this.tailBuf, chunk.length > END_BYTES ? chunk.subarray(chunk.length - END_BYTES) : chunk]);
    this.tailBuf = joined.length > END_BYTES ? joined.subarray(joined.length - END_BYTES) : joined;
  }

  get head(): string {
    return this.headBuf.toString('utf8');
  }

  get tail(): string {
    return this.tailBuf.toString('utf8');
  }
}
