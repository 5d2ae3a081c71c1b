/**
 * ServerHandles counts the servers with failMode "closed" through every change a reload or
 * `servers restart` makes to the hub's map (a new handle for a changed config, a removal, the
 * map cleared and filled again in config order), so that a call looks for a fail-closed blocker
 * only while one is configured (issue #9), and always then.
 */
import { describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/catalog/catalog.js';
import { ServerHandles } from '../../src/hub/server-handles.js';

const handle = (id: string, failMode: 'open' | 'closed') => ({ id, config: { failMode } }) as unknown as ServerHandle;

describe('ServerHandles', () => {
  it('counts fail-closed servers as handles are added, replaced, removed and the map refilled', () => {
    const m = new ServerHandles();
    expect(m.anyFailClosed).toBe(false);
    m.set('a', handle('a', 'open'));
    expect(m.anyFailClosed).toBe(false);
    m.set('b', handle('b', 'closed'));
    expect(m.anyFailClosed).toBe(true);
    // A reload's new config for b, open now; then closed again; the same handle set twice counts once.
    m.set('b', handle('b', 'open'));
    expect(m.anyFailClosed).toBe(false);
    const closed = handle('b', 'closed');
    m.set('b', closed);
    m.set('b', closed);
    m.set('a', handle('a', 'closed'));
    expect(m.anyFailClosed).toBe(true);
    m.delete('b');
    expect(m.anyFailClosed).toBe(true);
    m.delete('a');
    m.delete('missing');
    expect(m.anyFailClosed).toBe(false);
    // inConfigOrder: cleared, then set again in order.
    m.set('c', handle('c', 'closed'));
    const entries = [...m.entries()];
    m.clear();
    expect(m.anyFailClosed).toBe(false);
    for (const [id, h] of entries) m.set(id, h);
    expect(m.anyFailClosed).toBe(true);
    expect([...m.keys()]).toEqual(['c']);
  });
});
