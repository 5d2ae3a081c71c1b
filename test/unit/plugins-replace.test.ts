/** PluginRunner.replace: the plugins of a reloaded config taking over from the running ones. */
import { describe, expect, it } from 'vitest';
import { PluginRunner } from '../../src/plugins/runner.js';
import type { Plugin } from '../../src/plugins/types.js';
import { silentLogger } from '../../src/log.js';

const server = { id: 's', trust: 'untrusted' as const, era: '2026-07-28' };
const tool = { hubName: 's__t', upstreamName: 't', server, annotations: {} };

/** A plugin that marks results with its tag and logs its hooks into `seen`. */
function marker(tag: string, seen: string[]): Plugin {
  return {
    name: 'marker',
    beforeCall: () => void seen.push(`${tag}:before`),
    afterCall: (_ctx, r) => ({ ...r, content: [{ type: 'text', text: tag }] }),
    close: () => void seen.push(`${tag}:closed`),
  };
}

const textOf = (r: Record<string, unknown>): string => (r.content as { text: string }[])[0]!.text;

describe('PluginRunner.replace', () => {
  it('new calls take the new plugins; a call past beforeCall ends with the plugins that ran it; the old ones are closed', async () => {
    const seen: string[] = [];
    const runner = new PluginRunner([marker('old', seen)], silentLogger, () => undefined);
    const inFlight = await runner.beforeCall(tool, 'alice', undefined, {});
    await runner.replace([marker('new', seen)]);
    expect(seen).toEqual(['old:before', 'old:closed']);
    expect(textOf(await runner.afterCall(tool, 'alice', undefined, inFlight, { content: [] }))).toBe('old');
    const fresh = await runner.beforeCall(tool, 'alice', undefined, {});
    expect(textOf(await runner.afterCall(tool, 'alice', undefined, fresh, { content: [] }))).toBe('new');
    expect(seen.at(-1)).toBe('new:before');
  });

  it('two replacements take effect in their order, the first however slow to load', async () => {
    const seen: string[] = [];
    const runner = new PluginRunner([marker('start', seen)], silentLogger, () => undefined);
    let loadFirst!: (ps: Plugin[]) => void;
    const first = runner.replace(new Promise<Plugin[]>((r) => (loadFirst = r)));
    const second = runner.replace(Promise.resolve([marker('second', seen)]));
    await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual([]); // the second waits for the first
    loadFirst([marker('first', seen)]);
    await Promise.all([first, second]);
    expect(seen).toEqual(['start:closed', 'first:closed']);
    const plan = await runner.beforeCall(tool, 'alice', undefined, {});
    expect(textOf(await runner.afterCall(tool, 'alice', undefined, plan, { content: [] }))).toBe('second');
  });

  it('turns the call hooks on and off with the plugins it gets', async () => {
    const runner = new PluginRunner([{ name: 'lists-only', onList: () => undefined }], silentLogger, () => undefined);
    await runner.whenReady();
    expect(runner.callHooks).toBe(false);
    await runner.replace([marker('m', [])]);
    expect(runner.callHooks).toBe(true);
    await runner.replace([{ name: 'lists-only', onList: () => undefined }]);
    expect(runner.callHooks).toBe(false);
    await runner.replace([{ name: 'after-only', afterCall: () => undefined }]);
    expect(runner.callHooks).toBe(true);
    await runner.replace([]);
    expect(runner.callHooks).toBe(false);
  });

  it("closes the old plugins that have a close hook, and reports one that throws as the close hook's failure", async () => {
    const failures: string[] = [];
    const runner = new PluginRunner(
      [{ name: 'no-close' }, { name: 'bad-close', close: () => { throw new Error('disk gone'); } }],
      silentLogger,
      (f) => void failures.push(`${f.plugin} ${f.hook}: ${f.message}`),
    );
    await runner.replace([]);
    expect(failures).toEqual(['bad-close close: disk gone']);
  });

  it('plugins that finish loading after the hub stopped are closed, never used', async () => {
    const seen: string[] = [];
    const runner = new PluginRunner([marker('running', seen)], silentLogger, () => undefined);
    let load!: (ps: Plugin[]) => void;
    const late = runner.replace(new Promise<Plugin[]>((r) => (load = r)));
    await runner.close();
    load([marker('late', seen)]);
    await late;
    expect(seen).toEqual(['running:closed', 'late:closed']);
    const plan = await runner.beforeCall(tool, 'alice', undefined, {});
    expect(textOf(await runner.afterCall(tool, 'alice', undefined, plan, { content: [] }))).toBe('running');
  });

  it('a plugin object in both sets serves on, unclosed; one stopped with the hub is not closed again', async () => {
    const seen: string[] = [];
    const kept = marker('kept', seen);
    const runner = new PluginRunner([kept, marker('old', seen)], silentLogger, () => undefined);
    await runner.replace([kept]);
    expect(seen).toEqual(['old:closed']);
    let load!: (ps: Plugin[]) => void;
    const late = runner.replace(new Promise<Plugin[]>((r) => (load = r)));
    await runner.close();
    load([kept, marker('late', seen)]);
    await late;
    expect(seen).toEqual(['old:closed', 'kept:closed', 'late:closed']);
  });

  it('a failed load is reported and the running plugins stay', async () => {
    const seen: string[] = [];
    const failures: string[] = [];
    const runner = new PluginRunner([marker('kept', seen)], silentLogger, (f) => void failures.push(`${f.plugin} ${f.hook}: ${f.message}`));
    await runner.replace(Promise.reject(new Error('no such folder')));
    expect(failures).toEqual(['(loader) load: no such folder']);
    const plan = await runner.beforeCall(tool, 'alice', undefined, {});
    expect(textOf(await runner.afterCall(tool, 'alice', undefined, plan, { content: [] }))).toBe('kept');
  });
});
