/**
 * The frames that carry a client's answer back to a legacy server's request (a sampling, an
 * elicitation, a roots/list), and the one client that answers a roots/list asked outside any
 * call. Which call a request belongs to is ask-target.ts'; relaying it, UpstreamBase's.
 */
import type { Logger } from '../log.js';
import { INTERNAL_ERROR, RpcError } from '../protocol/errors.js';
import { fileRootsOnly, relayedInput } from '../protocol/input-results.js';
import { errorResponse, resultResponse, type Request } from '../protocol/jsonrpc.js';
import type { AskClient } from './types.js';

/** The frame of a client's answer to the server's `msg`; a roots answer with only the roots the server may take. */
export function answerFrame(msg: Request, result: Record<string, unknown>, log: Logger): string {
  if (msg.method === 'roots/list') {
    const { result: kept, dropped } = fileRootsOnly(result);
    if (dropped > 0) log.warn({ dropped, kept: (kept.roots as unknown[]).length }, 'client roots that are not file:// URIs left out of the answer to roots/list (2025-11-25 allows no others)');
    result = kept;
  }
  return JSON.stringify(resultResponse(msg.id, result));
}

/** The frame of a client's failure to answer `msg`: only errors a peer could have said travel on; local failures stay generic. */
export function failureFrame(msg: Request, err: unknown): string {
  return JSON.stringify(errorResponse(msg.id, err instanceof RpcError ? err : new RpcError(INTERNAL_ERROR, 'the client could not answer')));
}

/**
 * The client that last said its roots changed (UpstreamBase.rootsChanged), which answers the
 * roots/list a server sends outside any call, and its answer on the way.
 */
export class RootsRelay {
  /** Who said so last: their principal, how to ask their client, and whether it still can be (undefined: not known). */
  from: { principal: string; ask: AskClient; canAsk?: () => boolean } | undefined;
  /** Its answer on the way: roots/list sent meanwhile share it, so the client is asked once at a time. */
  private answer: Promise<Record<string, unknown>> | undefined;

  /** `principal`'s client said its roots changed: it answers from now on. */
  changed(principal: string, ask: AskClient, canAsk?: () => boolean): void {
    this.from = { principal, ask, canAsk };
    // A roots/list the server sends from now on is about this change: it does not share the
    // answer to one asked before it (its question still at the client, which may answer with
    // the roots it had then), or the server would keep those for good.
    this.answer = undefined;
  }

  /** The client that answers can no longer be asked (its session ended, its stream closed). */
  get gone(): boolean {
    return this.from?.canAsk?.() === false;
  }

  /** The answer to a roots/list outside any call, from `from`'s client: the one on the way, if any. */
  ask(msg: Request, from: { ask: AskClient }): Promise<Record<string, unknown>> {
    let answer = this.answer;
    if (answer === undefined) {
      try {
        answer = from.ask(relayedInput({ method: msg.method, params: msg.params }));
      } catch (err) {
        answer = Promise.reject(err);
      }
      const mine = answer;
      this.answer = mine;
      const clear = (): void => {
        if (this.answer === mine) this.answer = undefined;
      };
      mine.then(clear, clear);
    }
    return answer;
  }
}
