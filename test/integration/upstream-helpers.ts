/** Shared pieces of the upstream integration tests: fixture paths, specs, captured logs. */
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino, type Logger } from 'pino';
import type { UpstreamSpec } from '../../src/upstream/types.js';

export const QUIRKS = fileURLToPath(new URL('../fixtures/quirks/', import.meta.url));
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function tmpDir(): string {
  return mkdtempSync(join(tmpdir(), 'sy-upstream-'));
}

/** A stdio spec running one quirk fixture under node; QUIRK_LOG records what it received. */
export function quirkSpec(fixture: string, extra: Partial<UpstreamSpec> & { env?: Record<string, string> } = {}): UpstreamSpec & { logFile: string } {
  const logFile = join(tmpDir(), 'quirk.log');
  return {
    id: fixture.replace(/\W/g, '_'),
    command: process.execPath,
    args: [join(QUIRKS, `${fixture}.mjs`)],
    era: 'auto',
    timeoutMs: 5000,
    probeTimeoutMs: 1500,
    maxFrameBytes: 1 << 20,
    ...extra,
    env: { QUIRK_LOG: logFile, ...extra.env },
    logFile,
  };
}

export interface QuirkEntry {
  spawn?: number;
  grandchild?: number;
  sigterm?: number;
  in?: { id?: string | number; method?: string; params?: Record<string, unknown>; result?: unknown; error?: unknown };
}

/** What a fixture recorded, in order. */
export function quirkLog(file: string): QuirkEntry[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as QuirkEntry);
}

/** The messages each spawned process received, one array per process. */
export function perProcess(file: string): NonNullable<QuirkEntry['in']>[][] {
  const out: NonNullable<QuirkEntry['in']>[][] = [];
  for (const e of quirkLog(file)) {
    if (e.spawn !== undefined) out.push([]);
    else if (e.in && out.length > 0) out[out.length - 1].push(e.in);
  }
  return out;
}

/** A debug-level logger whose records the test can read. */
export function captureLogger(): { log: Logger; records: Record<string, unknown>[] } {
  const records: Record<string, unknown>[] = [];
  const log = pino({ level: 'debug' }, { write: (s: string) => void records.push(JSON.parse(s) as Record<string, unknown>) });
  return { log, records };
}

export async function waitFor(cond: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

