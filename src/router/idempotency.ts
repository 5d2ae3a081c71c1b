import type { AuditSink } from '../ledger/sink.js';
import type { StoredAnswer } from '../ledger/types.js';

function unknownRefusal(key: string): string {
  return `idempotency key "${key}" belongs to an earlier call whose outcome is unknown (the hub or the upstream stopped mid-call); check the effect, then use a new key`;
}

/**
 * Resolve an idempotency key before forwarding a tools/call: undefined means "run it" (this
 * caller owns the key now); otherwise a stored answer to replay or a refusal to return as a
 * tool error. A waiter whose first caller gave up before forwarding claims again.
 */
export async function settleIdempotency(
  keys: AuditSink['idempotency'],
  principal: string,
  key: string,
  tool: string,
  hash: string,
): Promise<{ answer: StoredAnswer } | { refusal: string } | undefined> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const claim = keys.claim(principal, key, tool, hash);
    switch (claim.kind) {
      case 'new':
        return undefined;
      case 'replay':
        return { answer: claim.answer };
      case 'conflict':
        return {
          refusal: `idempotency key "${key}" was already used for ${claim.tool === tool ? 'this tool with other arguments' : `tool "${claim.tool}"`}; use a new key`,
        };
      case 'unknown':
        return { refusal: unknownRefusal(key) };
      case 'wait':
        try {
          return { answer: await claim.result };
        } catch (err) {
          if ((err as Error)?.name === 'IdempotencyAbandonedError') continue;
          return { refusal: unknownRefusal(key) };
        }
    }
  }
  return { refusal: `idempotency key "${key}" is busy; retry later` };
}
