import { describe, expect, it } from 'vitest';
import { PluginRunner, type PluginFailure } from '../../src/plugins/runner.js';
import type { Plugin } from '../../src/plugins/types.js';
import { silentLogger } from '../../src/log.js';

const server = { id: 's', trust: 'untrusted' as const, era: '2026-07-28' };

// An answer whose `then` getter throws: the hub reads `then` to tell a promise from a value,
// and that read must be the hook's failure, not the hub's (it rejected the notification's
// handling, and stopped the closing of the plugins after it).
const poisoned = (): unknown => ({
  get then() {
    throw new Error('then getter');
  },
});

describe('a hook answer whose `then` getter throws', () => {
  it('onNotification: reported as the hook failing; the notification goes on to the next hook and the hub', async () => {
    const failures: PluginFailure[] = [];
    const seen: string[] = [];
    const plugins = [
      { name: 'odd', onNotification: poisoned },
      { name: 'next', onNotification: (ctx: { method: string }) => void seen.push(ctx.method) },
    ] as unknown as Plugin[];
    const runner = new PluginRunner(plugins, silentLogger, (f) => failures.push(f), 100);
    expect(await runner.notification(server, 'notifications/tools/list_changed', {})).toBe(true);
    expect(seen).toEqual(['notifications/tools/list_changed']);
    expect(failures).toMatchObject([{ plugin: 'odd', hook: 'onNotification', message: 'then getter' }]);
  });

  it('close: reported, and the plugins after it are still closed', async () => {
    const failures: PluginFailure[] = [];
    const closed: string[] = [];
    const plugins = [
      { name: 'odd', close: poisoned },
      { name: 'next', close: () => void closed.push('next') },
    ] as unknown as Plugin[];
    const runner = new PluginRunner(plugins, silentLogger, (f) => failures.push(f), 100);
    await runner.close();
    expect(closed).toEqual(['next']);
    expect(failures).toMatchObject([{ plugin: 'odd', hook: 'close', message: 'then getter' }]);
  });
});
