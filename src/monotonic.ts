/**
 * Whole milliseconds on a clock that only moves forward, for how long something has lasted or
 * may last. Date.now() is the wall clock, which NTP or an operator can step back or forward: a
 * limit measured on it stretches or shrinks by the step (an hour back locked every principal
 * out of its rate limit for an hour). Counts from the process start: never a time of day, never
 * stored, shown or compared with Date.now(). Whole, as Date.now() is: what it measures can reach
 * a client as an integer (a list's remaining ttlMs).
 */
export function monotonicNow(): number {
  return Math.floor(performance.now());
}
