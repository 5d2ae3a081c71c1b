import { describe, expect, it } from 'vitest';
import { Authenticator } from '../../src/auth/authenticator.js';
import { silentLogger } from '../../src/log.js';
import { EdgeGate } from '../../src/policy/gate.js';
import { RateLimiter } from '../../src/policy/rate-limit.js';
import type { AuditBegin, AuditEnd } from '../../src/ledger/types.js';

const call = (id: number) => ({ jsonrpc: '2.0' as const, id, method: 'tools/call', params: { name: 'echo__echo', arguments: {} } });
const facts = { clientAddress: '127.0.0.1', requestBytes: 10, group: undefined, traceparent: undefined };

describe('EdgeGate.admit', () => {
  it('lets a request in at once (no promise, no row); a refusal is a promise that settles once its row is written', async () => {
    const rows: [AuditBegin, AuditEnd][] = [];
    let written!: () => void;
    const auth = new Authenticator(undefined, '.', silentLogger);
    // A clock that stands still: the burst of one is spent by the first call.
    const gate = new EdgeGate(auth, new RateLimiter({ perPrincipal: { burst: 1, perSecond: 1 } }, () => 0), (b, e) => {
      rows.push([b, e]);
      return new Promise<void>((resolve) => (written = resolve));
    });
    const who = await auth.authenticate(() => undefined);
    expect(who.ok).toBe(true);
    if (!who.ok) return;
    const first = gate.admit(who, call(1), facts);
    expect(first).toBeNull();
    expect(rows).toEqual([]);
    const second = gate.admit(who, call(2), facts);
    expect(second).toBeInstanceOf(Promise);
    let settled = false;
    void (second as Promise<unknown>).then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false); // its row is not written yet
    expect(rows.map(([b, e]) => [b.method, b.hubName, e.outcome, e.errorCode])).toEqual([['tools/call', 'echo__echo', 'denied', 429]]);
    written();
    expect(await second).toMatchObject({ status: 429, message: expect.stringContaining('rate limit') });
  });
});
