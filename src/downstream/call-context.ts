/**
 * The era-neutral CallContext the core serves a request with, made from what its era carries: a
 * modern request's `_meta` (client, capabilities, log level), a legacy one's session.
 */
import type { Canceller, Signal } from '../cancel.js';
import { LEGACY, MODERN } from '../protocol/era.js';
import { isObj, type Request } from '../protocol/jsonrpc.js';
import { META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_IDEMPOTENCY_KEY, META_LOG_LEVEL, passThroughMeta } from '../protocol/meta.js';
import { spanOfMeta } from '../protocol/trace-context.js';
import { elicits } from '../protocol/client-capabilities.js';
import { LOG_LEVELS, type ClientCapabilities, type Implementation, type LoggingLevel } from '../protocol/types.js';
import type { CallContext } from '../router/context.js';
import type { MessageSink } from './core.js';
import type { Exchange } from './exchange.js';
import type { LegacySession } from './legacy-session.js';
import { progressRelay } from './progress-relay.js';

type Params = Record<string, unknown>;

/**
 * Whether a log line goes to a client that chose `min` (undefined: none chosen, all go). A line
 * of no level the spec knows never goes: it is malformed, passes no level a client chose, and a
 * client that checks what it gets (the SDKs do) would report it as an error.
 */
function levelAtLeast(level: unknown, min: LoggingLevel | undefined): boolean {
  const i = LOG_LEVELS.indexOf(level as LoggingLevel);
  return i >= 0 && (!min || i >= LOG_LEVELS.indexOf(min));
}

/**
 * The level a legacy session's requests ask a modern upstream for until it sends
 * logging/setLevel: every level, as a legacy server sends before it (the SDKs' servers filter
 * nothing until told a level). A modern server sends log lines only for a request naming a
 * level (digest §4): asked for none, it sent such a client nothing while a legacy server sent it
 * everything, and a server moving to the modern era went quiet for it.
 */
const LEVEL_BEFORE_SET_LEVEL: LoggingLevel = 'debug';

/** A modern request's context: what it is, who sent it, and what its `_meta` asked for. */
export function modernContext(req: Request, ex: Exchange, signal: Signal): CallContext {
  const meta = (req.params?._meta ?? {}) as Params;
  const token = meta.progressToken;
  const level = meta[META_LOG_LEVEL] as LoggingLevel | undefined;
  const sink = ex.sink;
  const idem = idempotencyOf(req, ex);
  const span = spanOfMeta(meta, ex);
  const ctx: CallContext = {
    requestId: req.id,
    principal: ex.principal,
    authContext: ex.authContext,
    credentialKey: ex.credentialKey,
    credentialKeysAt: ex.credentialKeysAt,
    credentialLapse: ex.credentialLapse,
    group: ex.group,
    clientAddress: ex.clientAddress,
    clientEra: MODERN,
    clientInfo: meta[META_CLIENT_INFO] as Implementation | undefined,
    clientCapabilities: meta[META_CLIENT_CAPABILITIES] as ClientCapabilities,
    signal,
    meta: passThroughMeta(meta, span, ex),
    span,
    logLevel: level,
    requestBytes: ex.requestBytes,
    idempotencyKey: idem?.key,
    idempotencyClash: idem?.clash,
  };
  // The exchange's own lookup: no closure per request.
  if (ex.transport === 'http') ctx.requestHeader = ex.header;
  if (token !== undefined) ctx.onProgress = progressRelay(sink, token);
  // Log messages reach modern callers only when this request asked for them (digest §4).
  if (level) ctx.onLog = (p) => levelAtLeast(p.level, level) && sink.send({ jsonrpc: '2.0', method: 'notifications/message', params: p });
  return ctx;
}

/**
 * A legacy request's context, from its session and its `_meta`. `limits`: the endpoint's, read
 * when a question is asked. `call`: the request's own canceller, which a question the client
 * cannot or does not answer ends (LegacySession.ask).
 */
export function legacyContext(session: LegacySession, req: Request, ex: Exchange, signal: Signal, limits: { inputTimeoutMs?: number }, call?: Canceller): CallContext {
  // A `_meta` that is no object (a string, an array) is refused before the request is served
  // (legacy-meta.ts); its row, written with this context, reads it as none: copied key by key,
  // it was {"0": "s", "1": "t", …}.
  const raw = req.params?._meta;
  const meta = isObj(raw) ? raw : undefined;
  const token = meta?.progressToken;
  const sink: MessageSink = ex.sink;
  const idem = idempotencyOf(req, ex);
  const span = spanOfMeta(meta, ex);
  const ctx: CallContext = {
    requestId: req.id,
    principal: ex.principal,
    authContext: ex.authContext,
    credentialKey: ex.credentialKey,
    credentialKeysAt: ex.credentialKeysAt,
    credentialLapse: ex.credentialLapse,
    group: session.group,
    clientAddress: ex.clientAddress,
    clientEra: LEGACY,
    clientInfo: session.clientInfo,
    clientCapabilities: session.capabilities,
    signal,
    meta: passThroughMeta(meta, span, ex),
    span,
    logLevel: session.logLevel ?? LEVEL_BEFORE_SET_LEVEL,
    requestBytes: ex.requestBytes,
    sessionKey: session.id,
    idempotencyKey: idem?.key,
    idempotencyClash: idem?.clash,
    // A legacy session's log lines are session-wide (digest §4): one the server sent after the
    // call's answer (its stream closed) goes on the session's own stream (its GET stream, stdout).
    onLog: (p) => {
      if (!levelAtLeast(p.level, session.logLevel)) return;
      const to = !sink.closed ? sink : session.stream;
      if (!session.ended && to !== undefined && !to.closed) to.send({ jsonrpc: '2.0', method: 'notifications/message', params: p });
    },
    // A URL-mode elicitation relayed to this client (or a -32042's step), completed upstream
    // (digest §5.2): on the call's stream while it is open, else on the session's own (its GET
    // stream, stdout), for a step done after the call; nowhere once the session has ended.
    // Only to a client that declared URL elicitation: one that did not is never given a step.
    onElicitationComplete: elicits(session.capabilities, 'url')
      ? (p) => {
          const to = !sink.closed ? sink : session.stream;
          if (!session.ended && to !== undefined && !to.closed) to.send({ jsonrpc: '2.0', method: 'notifications/elicitation/complete', params: p });
        }
      : undefined,
    askClient: (r, withdrawn) =>
      session.ask(sink, r, {
        signal,
        withdrawn,
        timeoutMs: limits.inputTimeoutMs,
        // Over HTTP the question travels on this POST's answer stream: once its connection
        // closes the question is withdrawn and the call ends, unless the stream is resumable
        // and its client reconnects in time (LegacySession.ask). Over stdio the answer can
        // come only on stdin: once it ends, the same.
        gone: ex.transport === 'http' ? ex.closed : ex.inputEnded,
        end: (why) => call?.abort(why),
      }),
  };
  if (token !== undefined) ctx.onProgress = progressRelay(sink, token);
  return ctx;
}

/**
 * A tools/call's idempotency key (`_meta`'s, else the header's) and, when the header names
 * another beside `_meta`'s, that one (`clash`): the call cannot keep both (the `_meta` key would
 * be kept and the header dropped, so a retry under the header alone, as an HTTP layer sends it,
 * would run again), and is refused. Undefined for other methods and a call without a key.
 */
function idempotencyOf(req: Request, ex: Exchange): { key: string; clash?: string } | undefined {
  if (req.method !== 'tools/call') return undefined;
  const m = (req.params?._meta as Params | undefined)?.[META_IDEMPOTENCY_KEY];
  const h = ex.header('idempotency-key')?.trim();
  if (typeof m === 'string' && m) return { key: m, clash: h && h !== m ? h : undefined };
  // An empty one is passed on as it is, for the call to refuse: ignored, a retry would run again.
  return h === undefined ? undefined : { key: h };
}
