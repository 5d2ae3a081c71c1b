/**
 * A 2025-11-25 server's result as the hub's core reads it. `resultType`, `inputRequests` and
 * `requestState` are fields of the 2026-07-28 era alone (digest §2.2, §5): a legacy server that
 * writes them means something of its own, and the core, which reads them as an input_required
 * round or an unknown result type, would retry the call with answers (running the tool again on
 * a server that knows no retries) or refuse a good answer. They are left out; the rest passes
 * as it came. The same object when none is there (the usual case: no copy).
 */
export function legacyResult(result: Record<string, unknown>): Record<string, unknown> {
  if (result.resultType === undefined && result.inputRequests === undefined && result.requestState === undefined) return result;
  const { resultType: _t, inputRequests: _i, requestState: _s, ...own } = result;
  return own;
}
