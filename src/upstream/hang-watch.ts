/**
 * Whether a server that answers the hub's pings and handshakes takes calls without answering
 * them (a worker hung, a lock never released): the row of calls left unanswered, the probation
 * of a server taken down for it and back, and the counts a call remembers at its send to tell,
 * at its timeout, whether the server worked meanwhile. The connection decides which timeouts
 * count (UpstreamBase.noteUnanswered) and what taking the server down means (callsUnanswered).
 */
import { monotonicNow } from '../monotonic.js';

/**
 * Public calls in a row that time out (the server's own limit) with no call answered and no
 * progress heard in between, after which the server is taken for one that takes calls but
 * answers none (see UpstreamBase.noteUnanswered). One long call is one timeout; any answer
 * (a result, a JSON-RPC error, a progress notification) starts the count over, and so does a
 * timeout that comes PROBATION_LIMITS of the server's call limits after the one before it.
 */
export const UNANSWERED_CALLS = 3;

/**
 * Probation (see HangWatch.probation) ends with the first call answered, or once the server
 * has been back this many of its own call limits (timeoutMs, or maxTotalTimeoutMs when shorter:
 * 10 minutes at the default 60 s) with no call left unanswered: with nothing but lists and pings
 * meanwhile (its tools not called, overnight), a call timing out then says how the server is now,
 * not that the hang it was restarted for goes on, and is one timeout of three again. Counted in
 * its limits, not a fixed time: a server whose calls may take 10 minutes would otherwise be off
 * probation before one of them could show it still hung. A row of calls left unanswered lapses
 * after as long without another (HangWatch.unansweredCall), for the same reason.
 */
export const PROBATION_LIMITS = 10;

export class HangWatch {
  /** How many times the connection became ready: a call remembers the one it was sent on (Pending.gen). */
  readyCount = 0;
  /** Calls answered and progress heard, ever: a call remembers the count it was sent at (Pending.answeredAtSend). */
  answers = 0;
  /** Calls of this ready connection that timed out in a row, no call answered since the first (see UNANSWERED_CALLS). */
  private unanswered = 0;
  /** When the last of those timed out (monotonicNow()): the row lapses PROBATION_LIMITS of its limits after. */
  private unansweredAt = 0;
  /**
   * Taken down for calls left unanswered (or, HTTP, a circuit opened by timeouts) and back since:
   * its handshake and pings are answered, so the next timeout, before any call is answered,
   * takes it down again rather than after UNANSWERED_CALLS more (each waiting out its timeout).
   * Ends at the first call answered, or after PROBATION_LIMITS (onProbation).
   */
  probation = false;
  /**
   * Taken down as hung either way (also: a stdio process its health check found silent) and
   * back since, not yet serving well: a hang now is one more in a row (RestartPolicy.onHung).
   * Ends as probation does.
   */
  private hungBack = false;
  /** When the connection last became ready (monotonicNow()): probation lapses PROBATION_LIMITS after. */
  private backAt = 0;

  /**
   * `limitMs`: the server's own limit on a call, read at each use (a reload may change it).
   * `servedWell`: off probation, a hang of it now is a first one again (RestartPolicy.onServedWell).
   */
  constructor(
    private readonly limitMs: () => number,
    private readonly servedWell: () => void,
  ) {}

  /** A new connection is up: calls sent from now on are its (their timeouts count, not older ones'). */
  connected(): void {
    this.readyCount++;
    this.unanswered = 0;
    this.backAt = monotonicNow();
  }

  /** Whether it is still on probation: it lapses once back PROBATION_LIMITS of its limits with no call left unanswered. */
  onProbation(): boolean {
    if ((this.probation || this.hungBack) && monotonicNow() - this.backAt >= PROBATION_LIMITS * this.limitMs()) this.endProbation();
    return this.probation;
  }

  /**
   * The server is being taken down as hung; `probation`: for calls left unanswered, and so on
   * probation once back. Not a process its health check found silent: that check may fire on a
   * machine too loaded to let a well server answer in time, and a probation then would have
   * the next slow call restart a server that only shared a busy machine; one still hung is found
   * again by the check, or by UNANSWERED_CALLS. A probation that lapsed meanwhile ends first, so
   * a server that served well since its last hang is restarted after the first delay again
   * (RestartPolicy.onServedWell), not a longer one.
   */
  wentHung(probation: boolean): void {
    this.onProbation();
    this.hungBack = true;
    if (probation) this.probation = true;
  }

  /** A call answered, or progress heard for one: the server is working its calls. */
  answered(): void {
    this.answers++;
    this.unanswered = 0;
    if (this.probation || this.hungBack) this.endProbation();
  }

  /**
   * A call that counts was left unanswered past its timeout. Far apart, timeouts are no row: a
   * call left unanswered now and two others days ago (the server answering nothing else
   * meanwhile: not called) say that this call was slow, not that the server takes calls without
   * answering them. As long as probation lasts (onProbation). Returns how many calls the row
   * had once it says the server hangs (it is then taken down as hung, on probation: wentHung),
   * 0 until then.
   */
  unansweredCall(): number {
    const now = monotonicNow();
    if (this.unanswered > 0 && now - this.unansweredAt >= PROBATION_LIMITS * this.limitMs()) this.unanswered = 0;
    this.unansweredAt = now;
    const n = ++this.unanswered;
    if (n < (this.onProbation() ? 1 : UNANSWERED_CALLS)) return 0;
    this.unanswered = 0;
    this.wentHung(true);
    return n;
  }

  /** Off probation: the server works its calls, and a hang of it now is a first one again (RestartPolicy.onServedWell). */
  private endProbation(): void {
    this.probation = false;
    this.hungBack = false;
    this.servedWell();
  }
}
