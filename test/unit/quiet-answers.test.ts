import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { QuietAnswers } from '../../src/downstream/quiet-answers.js';

afterEach(() => void vi.useRealTimers());

const answer = () => ({ streamed: 0, beginStream() { this.streamed++; } });

describe('QuietAnswers', () => {
  it('streams an answer still watched after one to two ticks, once; an answered one never', () => {
    vi.useFakeTimers();
    const q = new QuietAnswers(100);
    const quiet = answer();
    const answered = answer();
    q.watch(quiet);
    const id = q.watch(answered);
    vi.advanceTimersByTime(100);
    expect(quiet.streamed).toBe(0);
    q.unwatch(id);
    q.unwatch(id); // again (its end after its stream began): nothing
    vi.advanceTimersByTime(100);
    expect(quiet.streamed).toBe(1);
    expect(answered.streamed).toBe(0);
    vi.advanceTimersByTime(1000);
    expect(quiet.streamed).toBe(1);
    expect(q.size).toBe(0);
  });

  it('holds no timer while nothing is watched, and starts one for the next call', () => {
    vi.useFakeTimers();
    const q = new QuietAnswers(100);
    q.unwatch(q.watch(answer()));
    vi.advanceTimersByTime(300);
    expect(vi.getTimerCount()).toBe(0);
    const b = answer();
    q.watch(b);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(150);
    expect(b.streamed).toBe(0);
    vi.advanceTimersByTime(50);
    expect(b.streamed).toBe(1);
  });
});

/**
 * Every HTTP tools/call is watched and unwatched, so what holds the watched answers is churned at
 * every call and lives for a whole generation (5 s). As a Set it made the hub promote whole calls
 * once V8 had moved its table to the old generation (quiet-answers.ts; keyed-table.test.ts shows
 * the same of a Map). In a child with --trace-gc-nvp: 16 answers of ~1 KB watched at a time,
 * one full collection (which moves the tables to the old generation, as a start-up's scavenges
 * can), then the mean bytes each scavenge promotes: ~4 MB as a Set or a Map, ~60 KB as it is.
 */
describe('QuietAnswers and V8 scavenges', () => {
  it('a call watched and unwatched leaves nothing that keeps it through scavenges', async () => {
    const dist = resolve('dist/src/downstream/quiet-answers.js');
    expect(existsSync(dist), 'dist is built by the global setup (npx tsc -p .)').toBe(true);
    const script = `
      const { QuietAnswers } = await import(${JSON.stringify(pathToFileURL(dist).href)});
      const q = new QuietAnswers(3_600_000);
      const live = [];
      for (let i = 0; i < 400_000; i++) {
        if (i === 100_000) { gc(); console.log('FULL GC DONE'); }
        live.push(q.watch({ payload: new Array(100).fill(i), more: { a: [i], b: String(i) }, beginStream() {} }));
        if (live.length > 16) q.unwatch(live.shift());
      }`;
    const child = spawn(process.execPath, ['--single-threaded-gc', '--expose-gc', '--trace-gc-nvp', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    expect(await new Promise((r) => child.once('exit', r))).toBe(0);
    const promoted = [...out.slice(out.indexOf('FULL GC DONE')).matchAll(/gc=s .*? promoted=(\d+)/g)].map((m) => Number(m[1]));
    expect(promoted.length).toBeGreaterThan(10);
    expect(promoted.reduce((a, b) => a + b, 0) / promoted.length).toBeLessThan(512 * 1024);
  }, 60_000);
});
