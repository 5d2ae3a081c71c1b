import type { LegacySession } from './legacy-session.js';

/**
 * The "updated" signals a legacy session is owed after a gap in the hub's watching of the
 * resources it subscribed: a restarted hub took the session back (nothing watched them while
 * the hub was down or restarting), or a reload moved them to another server
 * (SessionTable.resubscribeMoved). An update said meanwhile was not heard, and the client, never
 * told its session ended, would not read them again. As after the hub's other gaps in watching
 * (docs/CATALOG.md), each URI subscribed again is said updated, once per gap, on the session's
 * GET stream once its client has it open: a POST may take the session back first (nothing is
 * said on its answer stream, and nothing is lost), and the GET may open before the subscriptions
 * are made again (it is said once they are, so that a read after it sees the resource watched).
 * A URI unsubscribed meanwhile is left out.
 */
export class OwedUpdates {
  private readonly unsubscribedSince = new Set<string>();
  /** URIs said updated while the session had no stream open to say them on (missed): said with the gap's. */
  private readonly missedMeanwhile = new Set<string>();
  /** 'owed' until said; 'waiting' while an open stream waits for the subscriptions to be made. */
  private state: 'owed' | 'waiting' | 'told' = 'owed';

  constructor(
    /** The URIs subscribed again for the session (those routed somewhere still); [] if that failed. */
    private readonly made: Promise<readonly string[]>,
    /** Hears how many URIs were said updated (for the log). */
    private readonly told: (uris: number) => void,
  ) {}

  /**
   * Another gap comes before this one was said (a reload moves the session's subscriptions before
   * its client opened its GET stream again after the take-back): what this one still owes is said
   * with the other's, once; this one owes nothing from now on. Replaced without this, its URIs
   * were never said updated. Resolves with both gaps' URIs.
   */
  withOwed(more: Promise<readonly string[]>): Promise<readonly string[]> {
    if (this.state !== 'owed') return more;
    this.state = 'told';
    const unsubscribed = this.unsubscribedSince;
    const missed = this.missedMeanwhile;
    return Promise.all([this.made, more]).then(([mine, theirs]) => [...new Set([...mine, ...missed].filter((u) => !unsubscribed.has(u)).concat(theirs))]);
  }

  /**
   * An update of `uri`, which the session holds, came while it had no stream open to say it on
   * (its client's POST took it back; the GET is not open yet): said with the gap's. So is the
   * signal of a server still starting at the take-back, which says each URI held there updated
   * itself once it watches them (left out of `made`: said by both, the client heard it twice,
   * the first time while nothing watched it).
   */
  missed(uri: string): void {
    if (this.state !== 'told') this.missedMeanwhile.add(uri);
  }

  unsubscribed(uri: string): void {
    this.unsubscribedSince.add(uri);
  }

  /** The session's GET stream opened (or was resumed): said there once the subscriptions are made again. */
  streamOpened(session: LegacySession): void {
    if (this.state !== 'owed') return;
    this.state = 'waiting';
    void this.made.then((uris) => {
      if (session.ended) return void (this.state = 'told');
      const s = session.stream;
      // Closed or cut before they were made again: said on the stream its client opens (or resumes) next.
      if (s === undefined || s.closed || s.connected === false) return void (this.state = 'owed');
      this.state = 'told';
      if (session.owedUpdates === this) session.owedUpdates = undefined;
      const owed = [...new Set([...uris, ...this.missedMeanwhile])].filter((u) => !this.unsubscribedSince.has(u));
      for (const uri of owed) s.send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } });
      if (owed.length) this.told(owed.length);
    });
  }
}
