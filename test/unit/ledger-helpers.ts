import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BEGIN_COLS, FIN_COLS } from '../../src/ledger/audit-apply.js';
import type { AuditBegin, AuditEnd } from '../../src/ledger/types.js';

/** A fresh temp folder per test; removed by the returned cleanup. */
export function tempDir(): { dir: string; db: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-ledger-'));
  return { dir, db: join(dir, 'ledger.db'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** After each test: its ledger closed (if it opened one), then its folder removed. */
export async function closeAndRemove(ledger: { close(): Promise<void> } | undefined, t: { cleanup(): void } | undefined): Promise<void> {
  await ledger?.close();
  t?.cleanup();
}

let n = 0;
export function begin(over: Partial<AuditBegin> = {}): AuditBegin {
  n++;
  return {
    ts: 1_700_000_000_000 + n,
    requestId: String(n),
    principal: 'alice',
    clientAddress: '127.0.0.1',
    clientEra: '2026-07-28',
    clientInfo: { name: 'test-client', version: '1.0' },
    method: 'tools/call',
    hubName: 'fs__read',
    server: 'fs',
    upstreamName: 'read',
    upstreamEra: '2025-11-25',
    requestBytes: 120,
    ...over,
  };
}

export function end(over: Partial<AuditEnd> = {}): AuditEnd {
  return { outcome: 'ok', errorKind: null, latencyMs: 12.5, responseBytes: 300, ...over };
}

/**
 * A pending file's record with its columns named: a positional line (a begin's BEGIN_COLS
 * values, then a finish's FIN_COLS values) as `{ s, e }`; a header such as `{ g: 1 }` as is.
 */
export function keyed(record: unknown): unknown {
  if (!Array.isArray(record)) return record;
  const named = (cols: readonly string[], values: unknown[]) => Object.fromEntries(cols.map((c, i) => [c, values[i]]));
  const s = named(BEGIN_COLS, record.slice(0, BEGIN_COLS.length));
  return record.length > BEGIN_COLS.length ? { s, e: named(FIN_COLS, record.slice(BEGIN_COLS.length)) } : { s };
}

/** A pending file's line as the ledger writes it, from named columns (the others null). */
export function line(s: Record<string, unknown>, e?: Record<string, unknown>): string {
  const values = (cols: readonly string[], named: Record<string, unknown>) => cols.map((c) => named[c] ?? null);
  return JSON.stringify(e ? [...values(BEGIN_COLS, s), ...values(FIN_COLS, e)] : values(BEGIN_COLS, s));
}

/** Polls `get` until `ok` holds or `timeoutMs` passes; returns the last value either way. */
export async function until<T>(get: () => T, ok: (v: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = get();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}
