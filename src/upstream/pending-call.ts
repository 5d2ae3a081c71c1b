/**
 * A request in flight toward an upstream, as UpstreamBase keeps it from send to settle: what the
 * call is, its timers, its progress token, what it holds (a limiter slot, a place in a call
 * gate) and gives back when it settles, and the transport's scratch. With the few facts read
 * off one: whether it is the hub's own request, and a fresh progress token for it.
 */
import type { CallOptions, ListenSink } from './types.js';

/** One request in flight toward the upstream. */
export interface Pending {
  readonly id: number;
  readonly method: string;
  readonly opts: CallOptions | undefined;
  readonly timeoutMs: number;
  /** Handshake requests: never cancelled upstream, allowed before ready. */
  readonly internal: boolean;
  resolve: (r: Record<string, unknown>) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout | undefined;
  /** The hard cap (maxTotalTimeoutMs): its timer, and the time left of it while paused. */
  hardTimer?: NodeJS.Timeout;
  /**
   * The hard cap's timer is not armed yet (UpstreamBase.armHard): the cap it will report. Set
   * while the idle timer is due first and has not been put off since.
   */
  hardLater?: number;
  /** When the whole call must be over (monotonicNow() ms), retries and waits included; see deadlineFor. */
  deadline?: number;
  hardLeftMs?: number;
  hardSince?: number;
  token: string | undefined;
  /** Server-to-client requests of this call still waiting for the client: the timeout pauses. */
  waits: number;
  /** Server-to-client requests of this call refused as past MAX_OPEN_ASKS (logged once). */
  refusedAsks?: number;
  /** elicitationIds of the URL-mode elicitations this call relayed (for notifications/elicitation/complete). */
  urlElicitations?: Set<string>;
  onAbort: (() => void) | undefined;
  /**
   * Transport scratch (HTTP: what cuts the POST short, session, retry state). `decoding`: bytes
   * of its answer were read and are still being decoded (HTTP: a compressed body, on the thread pool).
   */
  ctl?: { abort(): void; readonly decoding?: boolean };
  /**
   * HTTP: the POST of its notifications/cancelled, settled once the server took it. The answer to
   * a question the call asked goes after it: on another connection it could arrive first, and a
   * server whose question was answered (with an error) ends the call before the cancellation
   * finds it, so its handler is never told.
   */
  cancelSent?: Promise<void>;
  frame?: string;
  session?: string;
  retried?: boolean;
  /** A `subscriptions/listen` stream: no timeout; its messages go here. */
  listen?: ListenSink;
  /** What the call gives back when it settles (HOLDS_* bits): its limiter slot, its place in a call gate. */
  holds: number;
  /** A `tasks/result` (router/legacy-task.ts): the task it waits for, whose requests name it. */
  taskId?: string;
  /** Which ready connection it was sent on (HangWatch.readyCount): see UpstreamBase.noteUnanswered. */
  readonly gen: number;
  /** HangWatch.answers when it was sent: any answer since (or progress) says the server was working meanwhile. */
  readonly answeredAtSend: number;
}

/** The call holds a limiter slot (Limiter.tryEnter, or Limiter.enter after a wait). */
export const HOLDS_SLOT = 1;
/** The call is in a legacy stdio upstream's call gate, shared (CallGate.tryEnter(false)). */
export const HOLDS_SHARED = 2;
/** …or alone (CallGate.tryEnter(true)). */
export const HOLDS_EXCLUSIVE = 4;
/** Its limiter slot is the hub's own request's (CallOptions.hubOwn): Limiter.leave(true). */
export const HOLDS_OWN_SLOT = 8;

let tokenCounter = 0;
/** Progress tokens unique across the hub process, so no two calls ever share one. */
export function nextToken(): string {
  return `sy-${(++tokenCounter).toString(36)}`;
}

/** A `tools/list`, `resources/list`, `resources/templates/list` or `prompts/list`. */
export function isList(method: string): boolean {
  return method.endsWith('/list');
}

/** The hub's own request, made for no caller: a list the catalog fetches, or one marked CallOptions.hubOwn. */
export function hubsOwn(p: Pending): boolean {
  return isList(p.method) || p.opts?.hubOwn === true;
}
