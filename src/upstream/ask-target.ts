/**
 * Which call a legacy server's request to the client (a sampling, an elicitation, a roots/list)
 * belongs to, so that its question goes to that call's client and to nobody else's. A pure
 * function of the calls in flight and the stream the request came on; relaying the question
 * and its answer stays with the connection (UpstreamBase.onServerRequest).
 */
import type { IdTable } from '../keyed-table.js';
import { RELATED_TASK } from '../protocol/input-results.js';
import type { Request } from '../protocol/jsonrpc.js';
import { hubsOwn, type Pending } from './pending-call.js';

/**
 * Where a server's request goes. `target`: the call whose client is asked (undefined: none can
 * be). `nobody`: why no call is there for it at all, not that the client lacks the method
 * (-32601 would say so, and a server may remember it). `inFlight`: set when several calls could
 * be its own, and it is refused as ambiguous.
 */
export interface AskTarget {
  target?: Pending;
  nobody?: string;
  inFlight?: number;
}

/** The call `msg` belongs to: the one whose answer stream carried it (`via`), the one waiting for its task, or the one call in flight. */
export function askTarget(calls: IdTable<Pending>, msg: Request, via: Pending | undefined): AskTarget {
  if (via !== undefined) {
    const live = calls.get(via.id) === via;
    return { target: live && via.opts?.onServerRequest ? via : undefined, nobody: live ? undefined : `the call this ${msg.method} came with has ended` };
  }
  // A task's request names its task (spec: related-task): the call waiting for its result.
  const waiter = waiterFor(calls, relatedTask(msg.params));
  if (waiter !== undefined) return { target: waiter.opts?.onServerRequest ? waiter : undefined };
  // Unattributable: it can only be a call's if that call is the one in flight. With more
  // than one, answering for any of them could hand one user's request to another. Calls
  // waiting for a task count only when no other call is in flight: their task's requests
  // name the task (above). The hub's own requests (its list fetches) are no call: nobody
  // could be asked for one, and counted alone in flight it had the server told -32601.
  let n = 0;
  let tasks = 0;
  let target: Pending | undefined;
  let taskTarget: Pending | undefined;
  for (const p of calls.values()) {
    if (p.internal || p.listen || hubsOwn(p)) continue;
    if (p.taskId !== undefined) {
      tasks++;
      taskTarget = p.opts?.onServerRequest ? p : undefined;
      continue;
    }
    n++;
    target = p.opts?.onServerRequest ? p : undefined;
  }
  if (n === 0) {
    // Several task waits are as ambiguous as several calls (refused below).
    n = tasks;
    target = taskTarget;
  }
  if (n === 0) return { nobody: `no call of the hub's is in flight to ask ${msg.method} for` };
  if (n > 1) return { inFlight: n };
  return { target };
}

/** The call waiting for `task`'s result, if any. */
function waiterFor(calls: IdTable<Pending>, task: string | undefined): Pending | undefined {
  if (task === undefined) return undefined;
  for (const p of calls.values()) if (p.taskId === task && !p.internal) return p;
  return undefined;
}

/** The task a server's request says it belongs to (`_meta` io.modelcontextprotocol/related-task). */
function relatedTask(params: Record<string, unknown> | undefined): string | undefined {
  const meta = params?._meta as Record<string, unknown> | undefined;
  const related = meta?.[RELATED_TASK] as { taskId?: unknown } | undefined;
  return typeof related?.taskId === 'string' ? related.taskId : undefined;
}
