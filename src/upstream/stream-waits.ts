/**
 * How long the hub waits before it opens an SSE stream of a legacy server again: a call's
 * answer stream the server ended (or the network cut) after an event id, which is resumed
 * with `Last-Event-ID` (digest §6.2), and the standalone GET stream. Pure, so each rule can be
 * checked without a clock or a server.
 */

/** How long an answer stream may stay open after its response before the hub closes it (the server should: digest §6.2). */
export const ANSWERED_STREAM_LINGER_MS = 1_000;

/** The longest wait before a stream is opened again, whatever the server's `retry:` asked. */
const GET_RETRY_MAX_MS = 30_000;
/**
 * The least wait (±20 %) before the GET stream is opened again after the server ended it, even
 * one that brought messages and asked for less (`retry: 0`): a server ending every stream at
 * once would have the hub reconnect, and act on what each brought, in a busy loop.
 */
const GET_RETRY_MIN_MS = 1_000;
/** How long to wait before resuming a stream whose server named no `retry:` (the SSE default is the client's). */
const RESUME_WAIT_MS = 1_000;
/** A resumption that brings nothing new waits longer each time, from this, up to GET_RETRY_MAX_MS. */
const RESUME_IDLE_MIN_MS = 100;
/** Resumptions of a call's answer stream that may fail outright (no answer: the network) in a row. */
export const RESUME_FAILURES = 3;

/**
 * The wait before a call's answer stream is resumed: what the server's `retry:` asked (else
 * RESUME_WAIT_MS), longer after each of `idle` resumptions in a row that brought no message.
 */
export function resumeWaitMs(retryMs: number | undefined, idle: number): number {
  return Math.min(GET_RETRY_MAX_MS, Math.max(retryMs ?? RESUME_WAIT_MS, idle === 0 ? 0 : RESUME_IDLE_MIN_MS * 2 ** (idle - 1)));
}

/**
 * The wait before the standalone GET stream is opened again, after `failures` ends in a row
 * that brought nothing: the server's `retry:` if it asked one (jittered, at least
 * GET_RETRY_MIN_MS), else a backoff doubling from 1 s; at least `atLeastMs` (a Retry-After).
 */
export function getStreamWaitMs(failures: number, retryMs: number | undefined, atLeastMs: number, random: () => number = Math.random): number {
  const backoff = Math.min(GET_RETRY_MAX_MS, 1000 * 2 ** failures);
  return Math.max(
    Math.min(GET_RETRY_MAX_MS, atLeastMs),
    retryMs === undefined ? backoff : Math.min(GET_RETRY_MAX_MS, Math.max(retryMs, GET_RETRY_MIN_MS * (0.8 + 0.4 * random()))),
  );
}
