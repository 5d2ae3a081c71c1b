/**
 * The hub's servers by id, in config order, counting those with failMode "closed" as handles come
 * and go (a reload or `servers restart` sets, deletes and re-orders them; a changed config is a
 * new handle). Every guarded call asks whether a fail-closed server is down (failClosedBlocker),
 * which looked at every server per call (issue #9): with none configured, the usual case, it need
 * look at none. The state is still read at each call, so a server going down is seen at once.
 */
import type { ServerHandle } from '../catalog/catalog.js';

export class ServerHandles extends Map<string, ServerHandle> {
  private closed = 0;

  /** Whether any server has failMode "closed" (down or not). */
  get anyFailClosed(): boolean {
    return this.closed > 0;
  }

  override set(id: string, h: ServerHandle): this {
    this.closed -= failsClosed(this.get(id));
    super.set(id, h);
    this.closed += failsClosed(h);
    return this;
  }

  override delete(id: string): boolean {
    this.closed -= failsClosed(this.get(id));
    return super.delete(id);
  }

  override clear(): void {
    super.clear();
    this.closed = 0;
  }
}

function failsClosed(h: ServerHandle | undefined): number {
  return h?.config.failMode === 'closed' ? 1 : 0;
}
