/**
 * /admin/events: a WebSocket that streams finished requests (audit events) and upstream state
 * changes as JSON text frames. Events are batched per event-loop turn and a slow viewer drops
 * events rather than making the hub buffer without bound.
 */
import type { EventEmitter } from 'node:events';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import type { Logger } from '../log.js';
import { endAtExpiry } from './expiry.js';
import type { AuditEvent } from '../observe.js';
import type { Lapse } from '../auth/oauth.js';

export interface ServerStateEvent {
  type: 'serverState';
  ts: number;
  id: string;
  state: string;
  era: string | null;
  detail?: string;
}

/** A viewer further behind than this loses events (they are counted in `dropped`). */
const MAX_BUFFERED_BYTES = 1 << 20;
const MAX_VIEWERS = 64;

/** What the upgrade's checks decided: 200, or the status to refuse with; the credential's expiry. */
export interface Admission {
  status: number;
  expiresAt?: number;
  /** An OAuth token's: the feed ends sooner if the token stops verifying (Identity.lapse). */
  lapse?: Lapse;
}

/** No viewer yet: the feed's sockets before `ws` is loaded. */
const NONE: ReadonlySet<WebSocket> = new Set();

export class AdminEvents {
  /**
   * Made (and `ws` loaded) at the first viewer: a hub nobody watches, every `switchyard stdio`
   * among them, does not pay for loading it (~0.1 s of CPU at start).
   */
  private wss: WebSocketServer | undefined;
  private loading: Promise<WebSocketServer> | undefined;
  private closed = false;
  private queue: string[] = [];
  private scheduled = false;
  private auditOn = false;
  dropped = 0;
  private readonly onAudit = (e: AuditEvent) => this.push(e);
  private readonly onState = (e: ServerStateEvent) => this.push(e);

  constructor(
    private readonly events: EventEmitter,
    /** The first frame each viewer gets: the current picture. */
    private readonly hello: () => object,
    private readonly log: Logger,
  ) {
    events.on('serverState', this.onState);
  }

  private get clients(): ReadonlySet<WebSocket> {
    return this.wss?.clients ?? NONE;
  }

  private server(): Promise<WebSocketServer> {
    return (this.loading ??= import('ws').then(({ WebSocketServer }) => {
      const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
      wss.on('connection', (ws) => {
        ws.on('error', () => ws.terminate());
        ws.on('message', () => undefined); // viewers only listen
        ws.on('close', () => this.watchAudit());
        this.watchAudit();
        this.sendTo(ws, JSON.stringify({ type: 'hello', ...this.hello() }));
      });
      return (this.wss = wss);
    }));
  }

  /**
   * Listen for finished requests only while someone watches: the hub builds an event for
   * every finished request only when 'audit' has a listener.
   */
  private watchAudit(): void {
    let open = 0;
    for (const ws of this.clients) if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) open++;
    if ((open > 0) === this.auditOn) return;
    this.auditOn = open > 0;
    if (this.auditOn) this.events.on('audit', this.onAudit);
    else this.events.off('audit', this.onAudit);
  }

  get viewers(): number {
    return this.clients.size;
  }

  /** Take over an HTTP upgrade already checked by the caller (path, Host/Origin, admin). */
  async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, credentialExpiresAt?: number, lapse?: Lapse): Promise<void> {
    if (this.clients.size >= MAX_VIEWERS) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n');
      return;
    }
    const wss = await this.server();
    if (this.closed) return void socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => {
      // The viewer's credential is the feed's: it ends with it (the page asks for a new ticket).
      const stop = endAtExpiry(credentialExpiresAt, () => ws.close(4001, 'credential expired'));
      const unwatch = lapse?.watch(() => ws.close(4001, 'credential revoked'));
      ws.on('close', () => {
        stop();
        unwatch?.();
      });
      wss.emit('connection', ws, req);
    });
  }

  /** Reject an upgrade with a plain HTTP status. */
  static refuse(socket: Duplex, status: number, text: string): void {
    socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  }

  /**
   * Credentials changed (an API key revoked): every viewer is let go, since a socket does not
   * say which credential opened it. The status page comes back with a new ticket, if its
   * credential still works.
   */
  dropViewers(): void {
    for (const ws of this.clients) ws.close(4001, 'credentials changed');
  }

  close(): void {
    this.events.off('audit', this.onAudit);
    this.events.off('serverState', this.onState);
    this.closed = true;
    for (const ws of this.clients) ws.close(1001, 'hub stopping');
    this.wss?.close();
  }

  /** Attach to a listener for /admin/events only; other upgrades are left to other listeners or refused. */
  attach(server: Server, accept: (req: IncomingMessage) => Admission | Promise<Admission>): void {
    server.on('upgrade', async (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const path = (req.url ?? '/').split('?', 1)[0];
      if (path !== '/admin/events') {
        if (server.listenerCount('upgrade') === 1) AdminEvents.refuse(socket, 404, 'Not Found');
        return;
      }
      socket.on('error', () => socket.destroy());
      const { status, expiresAt, lapse } = await Promise.resolve(accept(req)).catch((): Admission => ({ status: 500 }));
      if (status !== 200) return AdminEvents.refuse(socket, status, status === 403 ? 'Forbidden' : status === 401 ? 'Unauthorized' : 'Bad Request');
      await this.upgrade(req, socket, head, expiresAt, lapse);
    });
  }

  private push(e: object): void {
    if (this.clients.size === 0) return;
    this.queue.push(JSON.stringify(e));
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    for (const ws of this.clients) for (const m of batch) this.sendTo(ws, m);
  }

  private sendTo(ws: WebSocket, text: string): void {
    if (ws.readyState !== ws.OPEN) return;
    if (ws.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.dropped++;
      return;
    }
    ws.send(text, (err) => err && this.log.debug({ err: String(err) }, 'admin event not delivered'));
  }
}
