/**
 * What a call that ran out of time is failed with and what the server is told of it: the idle
 * timeout (timeoutMs, reset by progress) or the hard cap (maxTotalTimeoutMs), and whether the
 * limit was the caller's own (no evidence against the server). Pure; the timers themselves,
 * armed and judged per call, stay with the connection (UpstreamBase.send, timerFired).
 */
import { TimeoutError } from '../protocol/errors.js';
import type { Pending } from './pending-call.js';

/** How long a due timeout waits at most for an answer that was read in time to be decoded (Pending.ctl.decoding). */
export const DECODE_WAIT_MS = 1_000;

/**
 * The error `p` fails with on `server`: `hardMs`, the hard cap fired rather than the idle
 * timeout. `ownLimitMs`, `maxTotalTimeoutMs`: the server's own limits, against which the
 * caller's are told apart.
 */
export function callTimeout(server: string, p: Pending, hardMs: number | undefined, ownLimitMs: number, maxTotalTimeoutMs: number | undefined): TimeoutError {
  const err = new TimeoutError(server, hardMs ?? p.timeoutMs);
  // A caller's own limit is one shorter than the server's: its timeoutMs, or its
  // maxTotalTimeoutMs when that is shorter still (the router passes the smaller of the two as
  // each call's timeoutMs, which is then the server's own, not a caller's).
  err.callers = hardMs !== undefined ? hardMs < (maxTotalTimeoutMs ?? Infinity) : p.timeoutMs < ownLimitMs;
  if (hardMs !== undefined) err.message = `server "${server}" did not finish within its limit of ${hardMs} ms (progress does not extend it)`;
  else if (p.token !== undefined) err.message = `server "${server}" did not answer within ${p.timeoutMs} ms (nor report progress)`;
  return err;
}

/** The reason the server's cancellation of a timed-out `p` gives. */
export function timeoutReason(p: Pending, hardMs: number | undefined): string {
  return hardMs !== undefined ? `exceeded its limit of ${hardMs} ms` : `timed out after ${p.timeoutMs} ms`;
}
