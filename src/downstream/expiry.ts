/** setTimeout's longest delay: a longer one fires at once (Node warns and uses 1 ms). */
const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * Runs `end` when a credential stops working (`expiresAt`, epoch ms), for a long-lived stream
 * it opened; nothing when it has no expiry. Returns the cancel for when the stream ends first.
 * The timer never keeps the process alive.
 */
export function endAtExpiry(expiresAt: number | undefined, end: () => void, now: () => number = Date.now): () => void {
  if (expiresAt === undefined) return noop;
  let timer: NodeJS.Timeout | undefined;
  // Always from a timer, never at once: the caller finishes setting the stream up first (a
  // token within the clock tolerance may be past its exp already).
  const arm = (): void => {
    timer = setTimeout(fire, Math.min(Math.max(0, expiresAt - now()), MAX_DELAY_MS));
    timer.unref();
  };
  const fire = (): void => {
    if (now() < expiresAt) return arm();
    timer = undefined;
    end();
  };
  arm();
  return () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
  };
}

function noop(): void {}
