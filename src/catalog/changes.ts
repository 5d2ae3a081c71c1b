/**
 * When each server's lists last may have changed, on one count of list changes (the epoch):
 * what an aggregate built, or a list asked for, before that moment may no longer route by.
 */
export class ListChanges {
  /** Counts list changes; an aggregate, and a list entry (askedAt), is dated by it. */
  private count = 0;
  /**
   * Each server's last change of its tools. An aggregate built before its server's list changed
   * must not route calls to that server's tools: the new definitions may be ones the pins refuse.
   */
  private readonly toolsAt = new Map<string, number>();
  /**
   * Each server's last moment its resource lists may have changed unseen by a list asked for
   * before it: a list_changed heard, a restart, a listen gap, a principal's connection gone, or
   * its changes heard only from then on (a listen stream acknowledged). A read is routed by a
   * list kept 0 ms, without asking for it again, only if it was asked for since (lastValid).
   */
  private readonly resourcesAt = new Map<string, number>();

  /** The count now: what is built or asked for now is dated by it. */
  get epoch(): number {
    return this.count;
  }

  /** The server's tools list may have changed. */
  tools(serverId: string): void {
    this.toolsAt.set(serverId, ++this.count);
  }

  /** The server's resource lists may have changed since any of them was asked for (see resourcesAt). */
  resources(serverId: string): void {
    this.resourcesAt.set(serverId, ++this.count);
  }

  /** Whether the server's tools may have changed since `epoch` (readyTool: once per call, no allocation). */
  toolsSince(serverId: string, epoch: number): boolean {
    return (this.toolsAt.get(serverId) ?? 0) > epoch;
  }

  /** The server's last resource change (0: none). */
  resourcesChangedAt(serverId: string): number {
    return this.resourcesAt.get(serverId) ?? 0;
  }
}
