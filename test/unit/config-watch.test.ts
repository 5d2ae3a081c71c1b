/**
 * The config watcher's reloads and how each ends (what `switchyard reload` prints), with a real
 * file on disk; the file watch itself is off, so only reloadNow reloads.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { watchConfig } from '../../src/config/watch.js';
import type { HubConfig } from '../../src/config/types.js';
import { silentLogger } from '../../src/log.js';
import { describeOutcome } from '../../src/cli/reload.js';

function configFile(doc: unknown): string {
  const file = join(mkdtempSync(join(tmpdir(), 'sy-watch-')), 'hub.config.json');
  writeFileSync(file, JSON.stringify(doc));
  return file;
}

describe('config watcher outcomes', () => {
  it('applied (with what apply reports), rejected (with every problem), failed (with the error), unchanged for a save without edits', async () => {
    const file = configFile({ servers: {}, pageSize: 7 });
    let fail = false;
    const w = watchConfig(file, silentLogger, async (c: HubConfig) => {
      if (fail) throw new Error('servers.x: Invalid URL');
      return { pageSize: c.pageSize };
    }, { watchFile: false });
    expect(await w.reloadNow('SIGHUP')).toEqual({ status: 'applied', report: { pageSize: 7 } });
    expect(await w.reloadNow('file changed')).toEqual({ status: 'unchanged' });
    writeFileSync(file, JSON.stringify({ servers: { c: { command: 42 } }, pageSize: -1 }));
    const rejected = await w.reloadNow('SIGHUP');
    expect(rejected.status).toBe('rejected');
    expect(rejected.status === 'rejected' && rejected.problems.length).toBe(2);
    writeFileSync(file, JSON.stringify({ servers: {}, pageSize: 8 }));
    fail = true;
    expect(await w.reloadNow('SIGHUP')).toEqual({ status: 'failed', error: 'servers.x: Invalid URL' });
    w.close();
    expect(await w.reloadNow('SIGHUP')).toEqual({ status: 'failed', error: 'the hub is stopping' });
  });

  it('a request made while a reload runs is answered by a run after it, which reads the file as it is then', async () => {
    const file = configFile({ servers: {}, pageSize: 1 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const seen: number[] = [];
    const w = watchConfig(file, silentLogger, async (c: HubConfig) => {
      seen.push(c.pageSize);
      if (seen.length === 1) await gate;
      return c.pageSize;
    }, { watchFile: false });
    const first = w.reloadNow('SIGHUP');
    await new Promise((r) => setTimeout(r, 20));
    writeFileSync(file, JSON.stringify({ servers: {}, pageSize: 2 }));
    const second = w.reloadNow('POST /admin/reload');
    const third = w.reloadNow('SIGHUP');
    release();
    expect(await second).toEqual({ status: 'applied', report: 2 });
    expect(await third).toEqual({ status: 'applied', report: 2 });
    expect(await first).toEqual({ status: 'applied', report: 2 }); // the loop it started ran the later ones too
    expect(seen).toEqual([1, 2]); // the two waiting requests share one run
    w.close();
  });

  it("a variable a reload finds unset is said to be missing from the hub's environment, as it was at its start", async () => {
    const file = configFile({ servers: {} });
    const w = watchConfig(file, silentLogger, async () => undefined, { watchFile: false });
    writeFileSync(file, JSON.stringify({ servers: { h: { url: 'http://127.0.0.1:1/mcp', headers: { Authorization: 'Bearer ${env:SY_WATCH_TEST_UNSET}' } } } }));
    expect(await w.reloadNow('SIGHUP')).toEqual({
      status: 'rejected',
      problems: [
        "servers.h.headers.Authorization: environment variable SY_WATCH_TEST_UNSET is not set in the hub's environment (as it was when the hub started; one set since in a shell reaches it only at a restart)",
      ],
    });
    w.close();
  });

  it('a request waiting behind a reload is not lost to a file event after it: the run after applies the file, its text unchanged', async () => {
    const file = configFile({ servers: {}, pageSize: 1 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let applied = 0;
    const w = watchConfig(file, silentLogger, async () => {
      if (++applied === 1) await gate;
      return applied;
    }, { watchFile: false });
    const first = w.reloadNow('SIGHUP');
    const asked = w.reloadNow('POST /admin/reload');
    void w.reloadNow('file changed');
    release();
    await first;
    // The file's text is what the first run read: only the request makes the second run apply it.
    expect(await asked).toEqual({ status: 'applied', report: 2 });
    w.close();
  });
  it('a file whose apply failed is not taken for applied: saving the same text again retries it', async () => {
    const file = configFile({ servers: {}, pageSize: 1 });
    let fail = true;
    const w = watchConfig(file, silentLogger, async (c: HubConfig) => {
      if (fail) throw new Error('servers.x: cannot be built');
      return c.pageSize;
    }, { watchFile: false });
    writeFileSync(file, JSON.stringify({ servers: {}, pageSize: 2 }));
    expect(await w.reloadNow('file changed')).toEqual({ status: 'failed', error: 'servers.x: cannot be built' });
    fail = false;
    // Saved again as it was (the cause fixed outside the file): applied, not "unchanged".
    expect(await w.reloadNow('file changed')).toEqual({ status: 'applied', report: 2 });
    expect(await w.reloadNow('file changed')).toEqual({ status: 'unchanged' });
    w.close();
  });

  it('a file refused (rejected, or its apply failed) and then put back as the running config says so, once, in the log', async () => {
    const running = JSON.stringify({ servers: {}, pageSize: 1 });
    const file = configFile({ servers: {}, pageSize: 1 });
    const logged: { level: number; msg: string }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
    let fail = false;
    const w = watchConfig(file, log, async () => {
      if (fail) throw new Error('servers.x: cannot be built');
    }, { watchFile: false });
    const back = () => logged.filter((l) => l.level === 30 && /back to the running config/.test(l.msg)).length;
    writeFileSync(file, JSON.stringify({ servers: {}, pageSize: -1 }));
    expect((await w.reloadNow('file changed')).status).toBe('rejected');
    writeFileSync(file, running);
    expect(await w.reloadNow('file changed')).toEqual({ status: 'unchanged' });
    expect(logged.at(-1)?.msg).toMatch(/^config file is back to the running config/);
    expect(back()).toBe(1);
    // A save without edits after that says nothing more.
    expect(await w.reloadNow('file changed')).toEqual({ status: 'unchanged' });
    expect(back()).toBe(1);
    // The same after an apply that failed.
    fail = true;
    writeFileSync(file, JSON.stringify({ servers: {}, pageSize: 2 }));
    expect((await w.reloadNow('file changed')).status).toBe('failed');
    writeFileSync(file, running);
    expect(await w.reloadNow('file changed')).toEqual({ status: 'unchanged' });
    expect(back()).toBe(2);
    w.close();
  });
});

describe('what switchyard reload prints', () => {
  it('one line per kind of change; nothing changed, or nothing new since a reload; plugins not loaded, a failure and a rejection apart from the output (stderr), with their exit codes', () => {
    const report = { added: ['a'], removed: ['b'], restarted: ['c'], updated: ['d', 'e'], applied: ['policy', 'plugins'], restartOnly: ['ledger'], pluginsFailed: [] };
    expect(describeOutcome({ status: 'applied', report })).toEqual({
      text:
        'reloaded:\n  servers added: a\n  servers removed: b\n  servers restarted: c\n  servers updated (connection kept): d, e\n  applied: policy, plugins\n' +
        '  changed, but only a restart applies them (the running values are kept): ledger\n',
      exitCode: 0,
    });
    expect(describeOutcome({ status: 'applied', report: { added: [], removed: [], restarted: [], updated: [], applied: [], restartOnly: [], pluginsFailed: [] } })).toEqual({ text: 'reloaded: nothing changed\n', exitCode: 0 });
    expect(describeOutcome({ status: 'unchanged' })).toEqual({ text: 'reloaded: nothing changed\n', exitCode: 0 });
    // A disabled entry added: `switchyard servers` lists it, so the reload says it brought it.
    expect(describeOutcome({ status: 'applied', report: { added: [], removed: [], restarted: [], updated: [], disabled: ['off'], applied: [], restartOnly: [], pluginsFailed: [] } })).toEqual({
      text: 'reloaded:\n  servers disabled in the config (not started): off\n',
      exitCode: 0,
    });
    expect(describeOutcome({ status: 'applied', report: { ...report, applied: ['plugins'], restartOnly: [], added: [], removed: [], restarted: [], updated: [], pluginsFailed: ['/x/broken.mjs: no default export'] } })).toEqual({
      text: 'reloaded:\n  applied: plugins\n',
      problem: 'plugins that could not be loaded (the hub runs without them, but where a line says the version loaded before runs on):\n  /x/broken.mjs: no default export\n',
      exitCode: 1,
    });
    // Nothing new (the file watch applied the file first): that reload, when, and what is still wrong.
    const none = { added: [], removed: [], restarted: [], updated: [], applied: [], pluginsFailed: [] };
    const earlier = { at: '2026-12-03T15:02:03.000Z', report: { ...none, added: ['b'], applied: ['plugins'], restartOnly: ['listen'], pluginsFailed: ['/x/broken.mjs: no default export'] } };
    expect(describeOutcome({ status: 'applied', report: { ...none, restartOnly: ['listen'], pluginsNotLoaded: ['/x/broken.mjs: no default export'], earlier } })).toEqual({
      text:
        'reloaded: nothing new since 2026-12-03T15:02:03.000Z, when the daemon applied this file (its file watch, SIGHUP or an earlier reload):\n' +
        '  servers added: b\n  applied: plugins\n  changed, but only a restart applies them (the running values are kept): listen\n',
      problem: 'plugins that could not be loaded (the hub runs without them, but where a line says the version loaded before runs on):\n  /x/broken.mjs: no default export\n',
      exitCode: 1,
    });
    // The plugin loads since: the earlier failure is history, not a failure now.
    expect(describeOutcome({ status: 'applied', report: { ...none, restartOnly: [], pluginsNotLoaded: [], earlier } })).toEqual({
      text: 'reloaded: nothing new since 2026-12-03T15:02:03.000Z, when the daemon applied this file (its file watch, SIGHUP or an earlier reload):\n  servers added: b\n  applied: plugins\n',
      exitCode: 0,
    });
    // A plugin the hub could not load at its start, with nothing changed since.
    expect(describeOutcome({ status: 'applied', report: { ...none, restartOnly: [], pluginsNotLoaded: ['/x/early.mjs: boom'] } })).toEqual({
      text: 'reloaded: nothing changed\n',
      problem: 'plugins that could not be loaded (the hub runs without them, but where a line says the version loaded before runs on):\n  /x/early.mjs: boom\n',
      exitCode: 1,
    });
    expect(describeOutcome({ status: 'failed', error: 'the hub is stopping' })).toEqual({ text: '', problem: 'config reload failed; the running config is kept: the hub is stopping\n', exitCode: 1 });
    expect(describeOutcome({ status: 'rejected', problems: ['pageSize: must be >= 1', 'servers.c.command: must be string'] })).toEqual({
      text: '',
      problem: 'config reload rejected; the running config is kept:\n  pageSize: must be >= 1\n  servers.c.command: must be string\n',
      exitCode: 2,
    });
  });
});

describe('the file watch, for a config reached through a symlink', () => {
  /** A watcher of `file` whose applied configs' pageSize are collected in `seen`. */
  function watching(file: string): { seen: number[]; close(): void } {
    const seen: number[] = [];
    const w = watchConfig(file, silentLogger, async (c: HubConfig) => void seen.push(c.pageSize), { debounceMs: 20 });
    return { seen, close: () => w.close() };
  }
  /** Saves as editors do: a new file renamed over the old one. */
  function save(file: string, pageSize: number): void {
    writeFileSync(`${file}.tmp`, JSON.stringify({ servers: {}, pageSize }));
    renameSync(`${file}.tmp`, file);
  }

  it('applies an edit of the file the link points to, in another folder (a dotfiles repository)', async () => {
    const target = configFile({ servers: {}, pageSize: 1 });
    const link = join(mkdtempSync(join(tmpdir(), 'sy-watch-link-')), 'hub.config.json');
    symlinkSync(target, link);
    const w = watching(link);
    save(target, 2);
    await expect.poll(() => w.seen, { timeout: 5_000, interval: 20 }).toEqual([2]);
    w.close();
  });

  it("applies a deploy that points the folder's link (`current`) at a new release, with the file in it", async () => {
    const app = mkdtempSync(join(tmpdir(), 'sy-watch-deploy-'));
    const release = (n: number) => {
      mkdirSync(join(app, `r${n}`));
      writeFileSync(join(app, `r${n}`, 'hub.config.json'), JSON.stringify({ servers: {}, pageSize: n }));
      symlinkSync(`r${n}`, join(app, 'current.tmp'));
      renameSync(join(app, 'current.tmp'), join(app, 'current'));
    };
    release(1);
    const w = watching(join(app, 'current', 'hub.config.json'));
    release(2);
    await expect.poll(() => w.seen, { timeout: 5_000, interval: 20 }).toEqual([2]);
    // The new release's own file is watched now.
    save(join(app, 'r2', 'hub.config.json'), 3);
    await expect.poll(() => w.seen, { timeout: 5_000, interval: 20 }).toEqual([2, 3]);
    w.close();
  });

  it('applies each update of a mounted ConfigMap (..data swapped to a new folder, the old one removed), not only the first', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-watch-cm-'));
    // As the kubelet lays it out: hub.config.json -> ..data/hub.config.json, ..data -> ..<version>.
    const version = (n: number) => {
      mkdirSync(join(dir, `..v${n}`));
      writeFileSync(join(dir, `..v${n}`, 'hub.config.json'), JSON.stringify({ servers: {}, pageSize: n }));
      symlinkSync(`..v${n}`, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      if (n > 1) rmSync(join(dir, `..v${n - 1}`), { recursive: true });
    };
    version(1);
    symlinkSync('..data/hub.config.json', join(dir, 'hub.config.json'));
    const w = watching(join(dir, 'hub.config.json'));
    version(2);
    await expect.poll(() => w.seen, { timeout: 5_000, interval: 20 }).toEqual([2]);
    version(3);
    await expect.poll(() => w.seen, { timeout: 5_000, interval: 20 }).toEqual([2, 3]);
    w.close();
  });
});
