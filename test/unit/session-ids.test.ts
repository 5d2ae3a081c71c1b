import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SessionIds } from '../../src/downstream/session-ids.js';

const facts = { protocolVersion: '2025-11-25', clientInfo: { name: 'c', version: '1' }, capabilities: { elicitation: {} }, principal: 'alice', group: 'g' };

describe('SessionIds', () => {
  it('another hub process with the same key reopens an id; the process that issued it does not', () => {
    const key = randomBytes(32);
    const first = new SessionIds(key);
    const id = first.issue(facts);
    expect(id).toMatch(/^s1\.[A-Za-z0-9_-]+$/); // visible ASCII, as a session id must be
    expect(first.reopen(id)).toBeNull();
    expect(new SessionIds(key).reopen(id)).toEqual(facts);
    const bare = new SessionIds(key).issue({ protocolVersion: '2025-06-18', capabilities: {}, principal: 'local' });
    expect(new SessionIds(key).reopen(bare)).toEqual({ protocolVersion: '2025-06-18', capabilities: {}, principal: 'local' });
  });

  it('an id names the session memory (ledger) of the hub that issued it, when it has one', () => {
    const key = randomBytes(32);
    const id = new SessionIds(key, 'ledger-a').issue(facts);
    expect(new SessionIds(key, 'ledger-b').reopen(id)).toEqual({ ...facts, home: 'ledger-a' });
    expect(new SessionIds(key).reopen(id)?.home).toBe('ledger-a');
  });

  it('refuses another key, a changed byte, a random id and garbage', () => {
    const key = randomBytes(32);
    const id = new SessionIds(key).issue(facts);
    const later = new SessionIds(key);
    expect(new SessionIds(randomBytes(32)).reopen(id)).toBeNull();
    for (let i = 3; i < id.length; i += 7) {
      const c = id[i] === 'A' ? 'B' : 'A';
      expect(later.reopen(id.slice(0, i) + c + id.slice(i + 1))).toBeNull();
    }
    for (const junk of ['', 's1.', 's1.AAAA', randomBytes(18).toString('base64url'), 's1.' + 'A'.repeat(9000)]) expect(later.reopen(junk)).toBeNull();
  });

  it('facts too large to carry get a plain random id, which no hub reopens', () => {
    const key = randomBytes(32);
    const id = new SessionIds(key).issue({ ...facts, clientInfo: { name: 'x'.repeat(3000), version: '1' } });
    expect(id).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(new SessionIds(key).reopen(id)).toBeNull();
  });
});
