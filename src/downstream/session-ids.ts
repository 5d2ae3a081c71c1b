import { randomBytes } from 'node:crypto';
import { deriveKey, openJson, sealText } from '../sealed.js';
import type { ClientCapabilities, Implementation } from '../protocol/types.js';

/**
 * Legacy (2025-11-25) HTTP session ids that carry their own session: the handshake's facts,
 * sealed (AES-256-GCM) with a key derived from the hub's requestState key. A hub that restarted,
 * or another hub given the same key, takes such an id back instead of answering 404, so a
 * client that never re-initializes (the most reported failure of gateways) keeps working. What
 * the session gathered later (subscriptions, a log level) is kept by the hub's SessionMemory,
 * named in the id by its `home`.
 */
export interface SessionFacts {
  protocolVersion: string;
  clientInfo?: Implementation;
  capabilities: ClientCapabilities;
  principal: string;
  /** The tool group of the endpoint it was opened on. */
  group?: string;
  /** The session memory (ledger) of the hub that opened it: SessionMemory.home. */
  home?: string;
}

const PREFIX = 's1.';
/** Beyond this the facts are not sealed into the id (a header of a few hundred bytes is enough). */
const MAX_FACTS_BYTES = 2048;

interface Sealed {
  v: string;
  i?: Implementation;
  c: ClientCapabilities;
  p: string;
  g?: string;
  h?: string;
  /** The hub process that issued it: an id of this process that is gone was ended here. */
  o: string;
}

export class SessionIds {
  private readonly key: Buffer;
  /** This process, in the ids it issues. */
  private readonly origin = randomBytes(9).toString('base64url');

  constructor(
    stateKey: Buffer,
    /** This hub's session memory (SessionMemory.home), sealed into the ids it issues. */
    private readonly home?: string,
  ) {
    this.key = deriveKey(stateKey, 'switchyard legacy session id key v1');
  }

  /** A new session's id; a plain random one when its facts are too large to carry. */
  issue(facts: SessionFacts): string {
    const sealed: Sealed = { v: facts.protocolVersion, c: facts.capabilities, p: facts.principal, o: this.origin };
    if (facts.clientInfo !== undefined) sealed.i = facts.clientInfo;
    if (facts.group !== undefined) sealed.g = facts.group;
    if (this.home !== undefined) sealed.h = this.home;
    const json = JSON.stringify(sealed);
    if (Buffer.byteLength(json) > MAX_FACTS_BYTES) return randomBytes(18).toString('base64url');
    return PREFIX + sealText(this.key, json);
  }

  /**
   * The facts of an id another hub process issued (an earlier one, or another hub with the same
   * key); null for anything else: a random id, one tampered with, another key's, or one of this
   * process (its session was ended here: DELETE, idleness, room for another, a removed key).
   */
  reopen(id: string): SessionFacts | null {
    if (!id.startsWith(PREFIX) || id.length > 4 * MAX_FACTS_BYTES) return null;
    let s: Sealed;
    try {
      s = openJson(this.key, id.slice(PREFIX.length)) as Sealed;
    } catch {
      return null;
    }
    if (s.o === this.origin) return null;
    const facts: SessionFacts = { protocolVersion: s.v, capabilities: s.c, principal: s.p };
    if (s.i !== undefined) facts.clientInfo = s.i;
    if (s.g !== undefined) facts.group = s.g;
    if (s.h !== undefined) facts.home = s.h;
    return facts;
  }
}
