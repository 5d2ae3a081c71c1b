/**
 * The requests of one connection, run one at a time on node:http as on the edge's fast path.
 *
 * node:http hands over every request it parses, pipelined ones included, at once: it stops
 * reading a connection only once unsent answers pile up. The fast path reads the next request
 * only once the one before is answered. So one connection that node:http read (a chunked body,
 * a header the fast path leaves to it) could put hundreds of calls in flight and fill a server's
 * whole queue: its own calls and every other client's were refused "busy". Here the next request
 * of a connection runs once the answer before it is finished; the answers leave in that order
 * anyway (HTTP/1.1), so a client loses nothing it could have had.
 */

/** What a turn needs of a request and its response (node:http's satisfy it). */
export interface TurnRequest {
  readonly socket: { readonly destroyed: boolean };
  /** The whole request was read, its body included. */
  readonly complete: boolean;
}
export interface TurnResponse {
  on(event: 'close', listener: () => void): unknown;
}

/**
 * Requests of one connection that may wait for their turn. node:http keeps parsing what comes
 * while they wait (its bodies too), so the queue has a bound: past it a request is refused at
 * once, and the refusals, answers written and not yet sent, are what make node:http stop reading.
 */
export const MAX_WAITING = 32;

interface Lane<Q, S> {
  /** The request whose turn it is, and its response. */
  running: [Q, S] | undefined;
  waiting: [Q, S][];
  /** Runs once nothing runs or waits (see whenIdle). */
  idle?: () => void;
}

export class ConnectionTurns<Q extends TurnRequest, S extends TurnResponse> {
  private readonly lanes = new WeakMap<object, Lane<Q, S>>();

  constructor(
    /** Serves a request whose turn it is; its response's 'close' ends the turn. */
    private readonly run: (req: Q, res: S) => void,
    /** Answers a request that found MAX_WAITING others waiting. */
    private readonly refuse: (req: Q, res: S) => void,
    /** Called for a request that has to wait (a body to read now, within its bound). */
    private readonly waits: (req: Q) => void = () => undefined,
  ) {}

  take(req: Q, res: S): void {
    let lane = this.lanes.get(req.socket);
    if (!lane) this.lanes.set(req.socket, (lane = { running: undefined, waiting: [] }));
    if (!lane.running) return this.start(lane, req, res);
    if (lane.waiting.length >= MAX_WAITING) return this.refuse(req, res);
    this.waits(req);
    lane.waiting.push([req, res]);
  }

  /**
   * Runs `fn` once the requests of `socket` taken so far are all answered: now if none is left,
   * or if one of them is still being read (its body would never come whole to be answered).
   */
  whenIdle(socket: object, fn: () => void): void {
    const lane = this.lanes.get(socket);
    if (!lane?.running || !lane.running[0].complete || lane.waiting.some(([req]) => !req.complete)) return fn();
    lane.idle = fn;
  }

  private start(lane: Lane<Q, S>, req: Q, res: S): void {
    lane.running = [req, res];
    res.on('close', () => {
      lane.running = undefined;
      // A connection gone takes its waiting requests with it: nobody would read their answers.
      if (req.socket.destroyed) lane.waiting.length = 0;
      const next = lane.waiting.shift();
      if (next) return this.start(lane, next[0], next[1]);
      const idle = lane.idle;
      lane.idle = undefined;
      idle?.();
    });
    this.run(req, res);
  }
}
