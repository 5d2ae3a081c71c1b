import { describe, expect, it } from 'vitest';
import { LegacySession } from '../../src/downstream/legacy-session.js';
import { OwedUpdates } from '../../src/downstream/owed-updates.js';
import type { MessageSink } from '../../src/downstream/core.js';

/** A GET stream that keeps what it is sent; `closed`/`connected` as the test sets them. */
function stream(): MessageSink & { sent: unknown[]; closed: boolean; connected: boolean } {
  const sent: unknown[] = [];
  return { sent, closed: false, connected: true, send: (m: object) => void sent.push(m) };
}

const uris = (s: { sent: unknown[] }) => s.sent.map((m) => (m as { params: { uri: string } }).params.uri);

/** A session taken back, its subscriptions made again when `make` is called. */
function takenBack(): { session: LegacySession; gap: OwedUpdates; make(uris: string[]): Promise<void>; told: number[] } {
  let resolve!: (u: string[]) => void;
  const made = new Promise<string[]>((r) => (resolve = r));
  const told: number[] = [];
  const session = new LegacySession('2025-11-25', undefined, {}, 'alice', 'sid');
  const gap = new OwedUpdates(made, (n) => told.push(n));
  session.owedUpdates = gap;
  return { session, gap, told, make: async (u) => (resolve(u), await made, await Promise.resolve()) };
}

describe('OwedUpdates', () => {
  it('says each URI made again updated on the stream open when they are made, once: not again at a later open', async () => {
    const t = takenBack();
    const s = stream();
    t.session.stream = s;
    t.gap.streamOpened(t.session);
    t.gap.streamOpened(t.session); // a resumption while it waits
    expect(s.sent).toEqual([]);
    await t.make(['a://1', 'b://2']);
    expect(uris(s)).toEqual(['a://1', 'b://2']);
    expect(t.told).toEqual([2]);
    expect(t.session.owedUpdates).toBeUndefined();
    const again = stream();
    t.session.stream = again;
    t.gap.streamOpened(t.session);
    await Promise.resolve();
    expect(again.sent).toEqual([]);
  });

  it('owes them to the next stream when the one open was cut or closed before they were made', async () => {
    for (const end of ['cut', 'closed'] as const) {
      const t = takenBack();
      const first = stream();
      t.session.stream = first;
      t.gap.streamOpened(t.session);
      if (end === 'cut') first.connected = false;
      else first.closed = true;
      await t.make(['a://1']);
      expect(first.sent).toEqual([]);
      const next = stream();
      t.session.stream = next;
      t.gap.streamOpened(t.session);
      await Promise.resolve();
      await Promise.resolve();
      expect(uris(next)).toEqual(['a://1']);
    }
  });

  it('leaves out a URI unsubscribed before, and says nothing to a session that ended or of none made', async () => {
    const t = takenBack();
    const s = stream();
    t.session.stream = s;
    t.gap.unsubscribed('b://2');
    t.gap.streamOpened(t.session);
    await t.make(['a://1', 'b://2']);
    expect(uris(s)).toEqual(['a://1']);

    const ended = takenBack();
    const e = stream();
    ended.session.stream = e;
    ended.gap.streamOpened(ended.session);
    ended.session.close();
    await ended.make(['a://1']);
    expect(e.sent).toEqual([]);

    const none = takenBack();
    const n = stream();
    none.session.stream = n;
    none.gap.streamOpened(none.session);
    await none.make([]);
    expect([n.sent, none.told]).toEqual([[], []]);
  });

  it('a later gap (a reload moving the subscriptions) before the stream opened says what the first still owes too, once; one already said is not said again', async () => {
    const t = takenBack();
    t.gap.unsubscribed('c://3');
    await t.make(['a://1', 'c://3']);
    const moved = Promise.resolve(['b://2']);
    const later = new OwedUpdates(t.gap.withOwed(moved), (n) => t.told.push(n));
    t.session.owedUpdates = later;
    const s = stream();
    t.session.stream = s;
    later.streamOpened(t.session);
    await new Promise((r) => setImmediate(r));
    expect(uris(s)).toEqual(['a://1', 'b://2']);
    expect(t.told).toEqual([2]);
    // Said already: a gap after it owes only its own.
    const last = new OwedUpdates(later.withOwed(Promise.resolve(['d://4'])), () => undefined);
    const s2 = stream();
    t.session.stream = s2;
    last.streamOpened(t.session);
    await new Promise((r) => setImmediate(r));
    expect(uris(s2)).toEqual(['d://4']);
  });

  it('an update missed while no stream was open (a server still starting saying it watches a URI again) is said with the gap, once; not one unsubscribed; carried by a later gap', async () => {
    const t = takenBack();
    t.gap.missed('b://2');
    t.gap.missed('a://1');
    t.gap.missed('c://3');
    t.gap.unsubscribed('c://3');
    const s = stream();
    t.session.stream = s;
    t.gap.streamOpened(t.session);
    await t.make(['a://1']);
    expect(uris(s)).toEqual(['a://1', 'b://2']);
    expect(t.told).toEqual([2]);
    // Said: a miss after it is not owed by this gap.
    t.gap.missed('d://4');
    const s2 = stream();
    t.session.stream = s2;
    t.gap.streamOpened(t.session);
    await new Promise((r) => setImmediate(r));
    expect(s2.sent).toEqual([]);

    const u = takenBack();
    u.gap.missed('b://2');
    await u.make([]);
    const later = new OwedUpdates(u.gap.withOwed(Promise.resolve(['e://5'])), () => undefined);
    u.session.owedUpdates = later;
    const s3 = stream();
    u.session.stream = s3;
    later.streamOpened(u.session);
    await new Promise((r) => setImmediate(r));
    expect(uris(s3)).toEqual(['b://2', 'e://5']);
  });
});
