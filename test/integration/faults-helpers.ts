/**
 * Shared by the fault suite (faults-*.test.ts): the fault fixtures, calls through the real hub,
 * /healthz, and process-tree inspection from /proc (to prove that no child outlives the hub).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ROOT } from '../helpers/hub-process.js';
import { modernCall, queryRows, sleep, type Answer, type Json, type Row } from './ledger-helpers.js';

export const FAULTS = 'test/fixtures/faults';
export const QUIRKS = 'test/fixtures/quirks';

let ids = 0;

/** A modern tools/call through the hub; `meta` adds `_meta` keys (progressToken, timeoutMs). */
export function callTool(url: string, name: string, args: Json = {}, meta?: Json, signal?: AbortSignal): Promise<Answer> {
  return modernCall(url, `t${++ids}`, 'tools/call', { name, arguments: args }, { meta, signal });
}

/** The text of a tool result (first content block). */
export function text(a: Answer): string {
  const c = (a.body?.result?.content as { text?: string }[] | undefined)?.[0];
  return c?.text ?? '';
}

export function isToolError(a: Answer): boolean {
  return a.body?.result?.isError === true;
}

export interface ServerHealthView {
  id: string;
  state: string;
  era: string | null;
  since: string;
  lastError: string | null;
  listError: string | null;
  tools: number;
  restarts: number;
  circuit?: string;
  inFlight: number;
  queued: number;
}

export async function healthOf(url: string): Promise<{ status: string; servers: ServerHealthView[] }> {
  const res = await fetch(new URL('/healthz', url));
  return (await res.json()) as { status: string; servers: ServerHealthView[] };
}

export async function serverHealth(url: string, id: string): Promise<ServerHealthView> {
  const h = await healthOf(url);
  const s = h.servers.find((x) => x.id === id);
  if (!s) throw new Error(`no server ${id} in /healthz: ${JSON.stringify(h)}`);
  return s;
}

export async function waitUntil<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
}

export function waitForState(url: string, id: string, states: string[], timeoutMs = 15_000): Promise<ServerHealthView> {
  return waitUntil(`${id} in ${states.join('|')}`, async () => {
    const s = await serverHealth(url, id);
    return states.includes(s.state) ? s : undefined;
  }, timeoutMs);
}

/** The audit rows of one hub tool name (they land once their call finishes). */
export async function rowsFor(db: string, tool: string, n = 1): Promise<Row[]> {
  return waitUntil(`${n} ledger row(s) for ${tool}`, async () => {
    const rows = await queryRows(db, { tool });
    return rows.length >= n ? rows : undefined;
  });
}

/** One line of http-faults.mjs's FAULT_LOG (its header says which kinds carry which fields). */
export interface FaultEntry {
  method?: string;
  name?: string;
  session: string | null;
  status: number;
  executed?: boolean;
  id?: unknown;
  requestId?: unknown;
  /** A GET's Last-Event-ID (null when it sent none). */
  lastEventId?: string | null;
  /** The Accept-Encoding of the gzip/gzipsse/zstd calls (null when none was sent). */
  acceptEncoding?: string | null;
  /** A DELETE's: whether the session it ended was one the server had issued. */
  known?: boolean;
  /** limited's arguments.tag. */
  tag?: string;
  /** 'modern' on what came in the modern era. */
  era?: string;
  /** Date.now() when recorded. */
  at?: number;
}

export interface FaultHttp {
  url: string;
  port: number;
  proc: ChildProcess;
  logFile: string;
  /** What the server recorded, in order. */
  log(): FaultEntry[];
  control(body: Json): Promise<void>;
  stop(): Promise<void>;
}

/** Runs http-faults.mjs on `port` (0 = free); FAULT_LOG goes to `logFile`. */
export function startFaultHttp(logFile: string, port = 0): Promise<FaultHttp> {
  const proc = spawn(process.execPath, [join(ROOT, FAULTS, 'http-faults.mjs'), '--http', String(port)], {
    cwd: ROOT,
    env: { ...process.env, FAULT_LOG: logFile },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const stop = (): Promise<void> =>
    new Promise((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill('SIGKILL');
    });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('http-faults did not start')), 10_000);
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /LISTENING (\d+)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      const p = Number(m[1]);
      const url = `http://127.0.0.1:${p}/mcp`;
      resolve({
        url,
        port: p,
        proc,
        logFile,
        log: () =>
          existsSync(logFile)
            ? readFileSync(logFile, 'utf8')
                .split('\n')
                .filter(Boolean)
                .map((l) => JSON.parse(l))
            : [],
        control: async (body) => {
          const r = await fetch(`http://127.0.0.1:${p}/control`, { method: 'POST', body: JSON.stringify(body) });
          await r.text();
        },
        stop,
      });
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`http-faults exited with ${code}`));
    });
  });
}

/** Every process whose parent chain leads to `pid`. */
export function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      parent.set(Number(e), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const want = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [p, pp] of parent) {
      if (want.has(pp) && !want.has(p)) {
        want.add(p);
        out.push(p);
        grew = true;
      }
    }
  }
  return out;
}

/** Alive and not a zombie. */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

export async function expectAllGone(pids: number[], timeoutMs = 8_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end && pids.some(running)) await sleep(100);
  expect(pids.filter(running)).toEqual([]);
}
