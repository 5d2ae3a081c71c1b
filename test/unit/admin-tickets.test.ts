import { describe, expect, it } from 'vitest';
import { AdminTickets, TICKET_TTL_MS } from '../../src/downstream/admin-tickets.js';

describe('the live feed tickets', () => {
  it('work once', () => {
    const t = new AdminTickets();
    const { ticket } = t.issue();
    expect(t.redeem(ticket)).toBe(true);
    expect(t.redeem(ticket)).toBe(false);
    expect(t.redeem('never-issued')).toBe(false);
  });

  it('stop working after their time, and are forgotten then', () => {
    let now = 1_000_000;
    const t = new AdminTickets(() => now);
    const late = t.issue().ticket;
    const kept = t.issue().ticket;
    now += TICKET_TTL_MS - 1;
    expect(t.redeem(kept)).toBe(true);
    now += 1;
    expect(t.redeem(late)).toBe(false);
    const stale = t.issue().ticket;
    now += TICKET_TTL_MS;
    t.issue(); // issuing drops the expired ones
    expect(t.size).toBe(1);
    expect(t.redeem(stale)).toBe(false);
  });

  it('are random and bounded in number: the oldest unused go first', () => {
    const t = new AdminTickets();
    const issued = Array.from({ length: 70 }, () => t.issue().ticket);
    expect(new Set(issued).size).toBe(70);
    expect(t.size).toBe(64);
    expect(t.redeem(issued[5]!)).toBe(false);
    expect(t.redeem(issued[6]!)).toBe(true);
    expect(t.redeem(issued[69]!)).toBe(true);
  });
});
