import type { AuditSink } from '../ledger/sink.js';
import type { IdempotencyClaim, KeyOwner, StoredAnswer } from '../ledger/types.js';
import { CancelledError, notSent } from '../protocol/errors.js';
import { reasonOf, unlessAborted, type Signal } from '../cancel.js';

/**
 * A key is left unknown by a call that may have run without an answer the hub could keep: it
 * timed out (the server's timeoutMs or the caller's), the client cancelled it, the hub cut it
 * off (-32021 mid-call), its connection to the server was lost, an HTTP server answered it a
 * 5xx (no JSON-RPC answer: it may have begun; not a 503 asking to be asked again later, nor a
 * 429, which refuse the request before it runs and free the key), the hub failed or stopped
 * while it ran (a row left in flight), or its answer could not be stored. One sentence true
 * of each, since the table keeps no cause, and none of the hub's inner workings.
 */
function unknownRefusal(key: string): string {
  return (
    `idempotency key "${key}" belongs to an earlier call whose outcome is unknown: it may have run, but it left no answer to replay ` +
    '(it timed out, was cancelled or cut off, lost its connection to the server or was failed by it (an HTTP 5xx), the hub failed or stopped during it, or its answer could not be stored); ' +
    'check the effect, then use a new key'
  );
}

/**
 * A key's kept answer, its refusal, or (`usedFor`) a key used for another tool than this call's:
 * refused by usedForRefusal, told that tool's name only where the caller may see it. Whether a
 * tool group shows it may take that tool's server's list (the hub's own tools list, built in the
 * background on a fresh hub, is not there yet), which the caller looks at (asynchronously) only
 * for such a refusal: a key's usual call pays nothing for it.
 */
export type Settled = { answer: StoredAnswer } | { refusal: string } | { usedFor: string; key: string };

/** The refusal of a key used for another tool: `named` when the caller may be told that tool's name. */
export function usedForRefusal(settled: { usedFor: string; key: string }, named: boolean): string {
  return `idempotency key "${settled.key}" was already used for ${named ? `tool "${settled.usedFor}"` : 'another tool'}; use a new key`;
}

/** A claim's answer other than 'new' and 'wait', as settleIdempotency gives it. */
function settledOf(claim: Exclude<IdempotencyClaim, { kind: 'new' } | { kind: 'wait' }>, key: string, tool: string): Settled {
  switch (claim.kind) {
    case 'replay':
      return { answer: claim.answer };
    case 'conflict':
      return claim.tool === tool ? { refusal: `idempotency key "${key}" was already used for this tool with other arguments; use a new key` } : { usedFor: claim.tool, key };
    case 'unknown':
      return { refusal: unknownRefusal(key) };
  }
}

/**
 * A key whose call has ended (its answer, or a refusal), or that another call holds with other
 * arguments: undefined when it is free or its call still runs. Claims nothing.
 */
export function endedKey(keys: AuditSink['idempotency'], owner: KeyOwner, key: string, tool: string, hash: string): Settled | undefined {
  const known = keys.peek?.(owner, key, tool, hash);
  return known && known.kind !== 'new' && known.kind !== 'wait' ? settledOf(known, key, tool) : undefined;
}

/**
 * Resolve an idempotency key before forwarding a tools/call: undefined means "run it" (this
 * caller owns the key now); otherwise a stored answer to replay or a refusal to return as a
 * tool error. A waiter whose first caller gave up before forwarding claims again. A waiter
 * whose own client cancels (`signal`) stops waiting with a CancelledError (it sent nothing;
 * the first call goes on).
 */
export async function settleIdempotency(
  keys: AuditSink['idempotency'],
  owner: KeyOwner,
  key: string,
  tool: string,
  hash: string,
  signal?: Signal,
): Promise<Settled | undefined> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const claim = keys.claim(owner, key, tool, hash);
    switch (claim.kind) {
      case 'new':
        return undefined;
      case 'replay':
      case 'conflict':
      case 'unknown':
        return settledOf(claim, key, tool);
      case 'wait': {
        const leave = claim.join?.();
        try {
          // Its own client's cancellation ends the wait (the first call may run for minutes): not
          // held, nor answered after it, nor audited `replayed`.
          const cancelled = (): never => {
            throw notSent(new CancelledError(reasonOf(signal!)));
          };
          return { answer: await unlessAborted(() => claim.result, signal, cancelled) };
        } catch (err) {
          if (err instanceof CancelledError) throw err;
          if ((err as Error)?.name === 'IdempotencyAbandonedError') continue;
          return { refusal: unknownRefusal(key) };
        } finally {
          leave?.();
        }
      }
    }
  }
  return { refusal: `idempotency key "${key}" is busy; retry later` };
}
