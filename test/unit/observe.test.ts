import { describe, expect, it } from 'vitest';
import { symlinkSync } from 'node:fs';
import { Ledger } from '../../src/ledger/ledger.js';
import { PendingFiles } from '../../src/ledger/pending-files.js';
import { NullLedger } from '../../src/ledger/sink.js';
import { auditEvent, tapAudit, type AuditObserver } from '../../src/observe.js';
import { begin, end, tempDir } from './ledger-helpers.js';

const nextTurn = () => new Promise<void>((r) => setImmediate(r));

function recorder(): AuditObserver & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    began: () => void log.push('began'),
    ended: (_b, e, began) => void log.push(`ended ${e.outcome}${began ? ' (began)' : ''}`),
    committed: (s) => void log.push(s >= 0 ? 'committed' : 'negative'),
  };
}

describe('tapAudit (metrics and the live feed see every finished request)', () => {
  it('reports begin, end and commit time of a real ledger', async () => {
    const t = tempDir();
    const ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    const o = recorder();
    const sink = tapAudit(ledger, o);
    await sink.begin(begin()).finish(end());
    await sink.record(begin(), end({ outcome: 'denied' }));
    await nextTurn();
    expect(o.log).toEqual(['began', 'ended ok (began)', 'committed', 'ended denied', 'committed']);
    await ledger.close();
    t.cleanup();
  });

  it("a begin's handle says whether its row was written, as the ledger's own does, after the turn it began in", async () => {
    const t = tempDir();
    // /dev/full refuses every write with ENOSPC, as a full disk does.
    for (const p of PendingFiles.paths(t.db)) symlinkSync('/dev/full', p);
    const ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    const sink = tapAudit(ledger, recorder());
    const h = sink.begin(begin());
    await nextTurn();
    // The turn's failure is forgotten by now: only the row's own promise still tells.
    await expect(sink.whenCommitted()).resolves.toBeUndefined();
    await expect(h.written).rejects.toMatchObject({ message: expect.stringMatching(/audit ledger cannot write \(ENOSPC\)/) });
    await ledger.close().catch(() => undefined);
    t.cleanup();
  });

  it('without a ledger nothing is committed, so no commit time is reported', async () => {
    const o = recorder();
    const sink = tapAudit(new NullLedger(), o);
    await sink.begin(begin()).finish(end());
    await sink.record(begin(), end({ outcome: 'denied' }));
    await nextTurn();
    expect(o.log).toEqual(['began', 'ended ok (began)', 'ended denied']);
  });

  it('observers run after the turn that finished the call, not on its path, and a failing one harms nothing', async () => {
    const o = recorder();
    const failing: AuditObserver = {
      ended: () => {
        throw new Error('observer bug');
      },
    };
    const sink = tapAudit(tapAudit(new NullLedger(), failing), o);
    const h = sink.begin(begin());
    await expect(h.finish(end())).resolves.toBeUndefined();
    expect(o.log).toEqual([]); // the answer goes out first
    await nextTurn();
    expect(o.log).toEqual(['began', 'ended ok (began)']);
  });

  it('rows committed by one write each get their own commit time, and a finish is reported once', async () => {
    const t = tempDir();
    const ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    const times: number[] = [];
    const o: AuditObserver = { ended: () => undefined, committed: (s) => void times.push(s) };
    const sink = tapAudit(ledger, o);
    // Five rows queued in one turn share the ledger's write; a sixth comes a turn later.
    const handles = Array.from({ length: 5 }, () => sink.begin(begin()));
    const finishing = handles.map((h) => h.finish(end()));
    expect(handles[0]!.finish(end())).toBe(finishing[0]); // twice: the same promise, one row
    await Promise.all(finishing);
    await sink.begin(begin()).finish(end());
    await nextTurn();
    expect(times).toHaveLength(6);
    expect(times.every((s) => s >= 0 && s < 1)).toBe(true);
    await ledger.close();
    t.cleanup();
  });

  it("the live feed shows a replayed error as replayed_error, as ledger query and /metrics do, not as a replayed success", () => {
    expect(auditEvent(begin(), end({ outcome: 'replayed', errorKind: 'jsonrpc', errorCode: -32001 })).outcome).toBe('replayed_error');
    expect(auditEvent(begin(), end({ outcome: 'replayed', errorKind: 'tool' })).outcome).toBe('replayed_error');
    expect(auditEvent(begin(), end({ outcome: 'replayed' })).outcome).toBe('replayed');
  });
});
