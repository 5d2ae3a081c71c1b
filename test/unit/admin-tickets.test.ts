import { describe, expect, it, vi } from 'vitest';
import { AdminTickets, TICKET_TTL_MS } from '../../src/downstream/admin-tickets.js';

describe('the live feed tickets', () => {
  it('work once', () => {
    const t = new AdminTickets();
    const { ticket } = t.issue();
    expect(t.redeem(ticket)).not.toBeNull();
    expect(t.redeem(ticket)).toBeNull();
    expect(t.redeem('never-issued')).toBeNull();
  });

  it('stop working after their time, and are forgotten then', () => {
    let now = 1_000_000;
    const t = new AdminTickets(() => now);
    const late = t.issue().ticket;
    const kept = t.issue().ticket;
    now += TICKET_TTL_MS - 1;
    expect(t.redeem(kept)).not.toBeNull();
    now += 1;
    expect(t.redeem(late)).toBeNull();
    const stale = t.issue().ticket;
    now += TICKET_TTL_MS;
    t.issue(); // issuing drops the expired ones
    expect(t.size).toBe(1);
    expect(t.redeem(stale)).toBeNull();
  });

  it('are random and bounded in number: the oldest unused go first', () => {
    const t = new AdminTickets();
    const issued = Array.from({ length: 70 }, () => t.issue().ticket);
    expect(new Set(issued).size).toBe(70);
    expect(t.size).toBe(64);
    expect(t.redeem(issued[5]!)).toBeNull();
    expect(t.redeem(issued[6]!)).not.toBeNull();
    expect(t.redeem(issued[69]!)).not.toBeNull();
  });

  it('carry the expiry of the credential that asked for them, and never outlive it', () => {
    let now = 1_000_000;
    const t = new AdminTickets(() => now, TICKET_TTL_MS, () => now);
    const soon = now + 5_000;
    const issued = t.issue(soon);
    expect(issued.expiresInMs).toBe(5_000);
    expect(t.redeem(issued.ticket)).toEqual({ credentialExpiresAt: soon });
    const unused = t.issue(soon).ticket;
    now = soon;
    expect(t.redeem(unused)).toBeNull();
    expect(t.redeem(t.issue().ticket)).toEqual({ credentialExpiresAt: undefined });
  });

  it('last their time on the monotonic clock, whatever the wall clock is stepped to', () => {
    vi.useFakeTimers({ toFake: ['Date', 'performance'] });
    try {
      const t = new AdminTickets();
      const back = t.issue().ticket;
      const ahead = t.issue().ticket;
      vi.setSystemTime(Date.now() + 3_600_000);
      vi.advanceTimersByTime(1_000);
      // Before, an hour ahead failed every ticket just issued...
      expect(t.redeem(ahead)).not.toBeNull();
      vi.setSystemTime(Date.now() - 7_200_000);
      vi.advanceTimersByTime(TICKET_TTL_MS);
      // ...and an hour back kept one working for that hour.
      expect(t.redeem(back)).toBeNull();
      // A credential's expiry is a time of day: the ticket lasts what it has left by the wall clock.
      const issued = t.issue(Date.now() + 5_000);
      expect(issued.expiresInMs).toBe(5_000);
      vi.advanceTimersByTime(5_000);
      expect(t.redeem(issued.ticket)).toBeNull();
    } finally {
      vi.useRealTimers();
    }
  });
});
