/** A signal that aborts after `ms`, for exchanges that must not wait for good. */
export interface TimeoutSignal {
  readonly signal: AbortSignal;
  /** Clear the timer once the exchange is over, so a finished one holds no timer open. */
  clear(): void;
  /** Whether the timer fired: the caller words its error as a timeout rather than as what the abort caused. */
  timedOut(): boolean;
}

export function timeoutSignal(ms: number): TimeoutSignal {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), ms);
  return { signal: ctl.signal, clear: () => clearTimeout(t), timedOut: () => ctl.signal.aborted };
}
