/**
 * An approval (a pin change made by another process) that lands while a tools list is being
 * built: the aggregate that build makes was judged before the approval and must not be taken
 * for a current one afterwards. (It was keyed by the catalog's pin generation at the end of
 * the build, not the one its parts were judged under, so the next list reused it: the approved
 * tool stayed hidden until something else changed. Seen once in CI as catalog-pins' "approve
 * brings it back".) Real Catalog; a stand-in upstream answering tools/list, and a plugin hook
 * that holds the first build until the approval is in.
 */
import { EventEmitter } from 'node:events';
import { expect, it } from 'vitest';
import { Catalog } from '../../src/catalog/catalog.js';
import { NameAssigner } from '../../src/catalog/names.js';
import { MemoryPinStore, type PinRecord } from '../../src/catalog/pins.js';
import { silentLogger } from '../../src/log.js';
import { serverConfig } from '../integration/catalog-helpers.js';

class ApprovableStore extends MemoryPinStore {
  cb: ((changed: PinRecord[]) => void) | undefined;
  onExternalChange(cb: (changed: PinRecord[]) => void): void {
    this.cb = cb;
  }
}

it('a list built across an approval is not reused after it: the approved tool is shown at the next list', async () => {
  const up: any = new EventEmitter();
  up.state = 'ready';
  up.era = undefined;
  up.capabilities = { tools: { listChanged: true } };
  up.request = async (m: string) => (m === 'tools/list' ? { tools: [{ name: 'echo', description: 'Echo, changed', inputSchema: { type: 'object' } }] } : {});
  const h: any = { id: 's', config: serverConfig('s'), upstream: up };
  const store = new ApprovableStore();
  // Approved once under another definition: the current one is a change, held back (pinning: block).
  store.put({ server: 's', tool: 'echo', hash: 'x'.repeat(64), variants: [], bodyHash: 'y'.repeat(64), definition: '{}', pendingHash: null, pendingBodyHash: null, pendingDefinition: null, pendingReason: null, renamedFrom: null, firstSeenMs: 1, approvedMs: 1, approvedBy: 'first-seen', pendingSinceMs: null });
  let hold: Promise<void> = Promise.resolve();
  const plugins: any = {
    list: async (_k: string, _s: unknown, items: any[]) => {
      await hold;
      return { items, flags: new Map(), hidden: new Map() };
    },
    notification: async () => true,
  };
  const c = new Catalog(() => [h], new NameAssigner(), silentLogger, { plugins, pins: store });
  const names = async () => ((await c.aggregate('tools')).items as any[]).map((t) => t.name);
  expect(await names()).toEqual([]); // held back

  // A list whose build waits in a plugin hook, judged before the approval (another pin change
  // first, so that the list is judged again rather than taken from the memo).
  let release!: () => void;
  hold = new Promise((r) => (release = r));
  store.cb!([]);
  const during = names();
  await new Promise((r) => setTimeout(r, 20));
  // The operator approves what is pending (another process: the store says so through its callback).
  const rec = store.get('s', 'echo')!;
  const approved = { ...rec, hash: rec.pendingHash, bodyHash: rec.pendingBodyHash, definition: rec.pendingDefinition, pendingHash: null, pendingBodyHash: null, pendingDefinition: null, pendingReason: null, approvedBy: 'cli' };
  store.put(approved);
  store.cb!([approved]);
  release();
  expect(await during).toEqual([]); // judged before the approval
  hold = Promise.resolve();
  expect(await names()).toEqual(['s__echo']);
  c.close();
});
