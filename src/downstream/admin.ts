/**
 * Operator routes on the hub's own listener (and on the admin listener, listen.admin): /metrics (Prometheus), /admin/servers,
 * /admin/tools, /admin/ledger, /admin/ticket, /admin/pins/changed (the CLI's approval), the /admin/events WebSocket and the status page
 * at /admin/. Without authentication the operator is whoever connects over loopback
 * (isAdmin), or over the admin socket (listen.admin.path, admin-socket.ts). With authentication on, the HTTP edge asks for an admin credential instead
 * (except for the page's own files, isStatusPageFile), wherever the caller connects from.
 */
import type { EventEmitter } from 'node:events';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { Catalog, ServerHandle } from '../catalog/catalog.js';
import type { HubConfig } from '../config/types.js';
import type { AuditFilter, AuditRow } from '../ledger/rows.js';
import type { AuditSink } from '../ledger/sink.js';
import { parseWhen } from '../ledger/when.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { packageRoot } from '../paths.js';
import { VERSION } from '../version.js';
import type { Identity } from '../auth/authenticator.js';
import type { ReloadOutcome } from '../config/watch.js';
import { AdminEvents, type Admission } from './admin-events.js';
import { AdminTickets } from './admin-tickets.js';
import { itemViews, serverViews, toolViews } from './admin-views.js';
import type { InstructionsVerdict } from '../catalog/instructions.js';
import { adminOriginAllowed, hostAllowed, isLoopbackHost, type OriginPolicy } from './origin.js';
import { traceIdQuery } from '../protocol/trace-context.js';
import { requestIdQuery } from '../ledger/request-id.js';
import { SHOWN_OUTCOMES } from '../ledger/types.js';
import { requestIdJson } from '../ledger/format.js';
import type { OwnDown } from '../auth/upstream-pool.js';

/** What the admin routes read from the hub. */
export interface AdminHub {
  readonly handles: ReadonlyMap<string, ServerHandle>;
  readonly catalog: Catalog;
  readonly ledger: AuditSink;
  /** Made by the hub's listen(), before these routes. */
  readonly metrics: Metrics | undefined;
  readonly events: EventEmitter;
  readonly config: HubConfig;
  /** A server's instructions and what the poisoning checks made of them (undefined: none given). */
  instructionsVerdict?(h: ServerHandle): InstructionsVerdict | undefined;
  /** Tools whose calls are refused because their schemas cannot be used: hub name → why. */
  readonly validator?: { readonly flagged: ReadonlyMap<string, string> };
  /** The principals' own connections to a server that are down now (absent: none are kept). */
  readonly upstreams?: { down(serverId: string): OwnDown[] };
  /** A fresh connection for one running server (POST /admin/servers/<id>/restart); throws for an unknown one. */
  restartServer?(id: string): void;
  /** Read the config file again and apply it (POST /admin/reload); absent for a hub with no file to read. */
  readonly reloadConfigFile?: () => Promise<ReloadOutcome<unknown>>;
}

/** How each way a reload ends answers POST /admin/reload. */
const RELOAD_STATUS: Record<ReloadOutcome<unknown>['status'], number> = { applied: 200, unchanged: 200, rejected: 422, failed: 500 };

/** A ledger the routes can read (the SQLite one; a disabled ledger cannot). */
interface Queryable {
  queryPages(filter: Omit<AuditFilter, 'afterSeq'>): Iterable<AuditRow[]>;
}

/** The status page's files (served from the package, since tsc does not copy them). */
export const ADMIN_PAGE_DIR = join(packageRoot, 'static', 'admin');
const PAGE_FILES: Record<string, string> = {
  '/admin/': 'index.html',
  '/admin/index.html': 'index.html',
  '/admin/app.js': 'app.js',
  '/admin/style.css': 'style.css',
};
const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};
const MAX_LEDGER_ROWS = 1000;
/**
 * Characters of stored bodies (argsJson, resultJson) one /admin/ledger answer holds at most: a
 * row keeps up to 1 MiB of each with ledger.storeBodies, and 1,000 such rows were read into the
 * hub's memory and made into one string at once (2 GiB: the hub ran out of memory, or of string
 * length). Past it the answer ends early, `truncated: true`; its first row is always there.
 */
const MAX_LEDGER_BODY_CHARS = 8 * 1024 * 1024;

/**
 * The status page's own files: static, with no data in them, so they are served without
 * credentials; the page then asks the operator for one (see static/admin/app.js), since a
 * browser's address bar cannot send an `Authorization` header. Everything they show comes
 * from routes that need it.
 */
export function isStatusPageFile(path: string, method: string | undefined): boolean {
  return (method === 'GET' || method === 'HEAD') && (path === '/admin' || Object.hasOwn(PAGE_FILES, path));
}

/** Without authentication, the operator is whoever connects over loopback. */
export function isAdmin(req: IncomingMessage): boolean {
  const a = req.socket.remoteAddress ?? '';
  return isLoopbackHost(a) || a.startsWith('::ffff:127.');
}

class BadQuery extends Error {}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const s = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(s), 'cache-control': 'no-store' });
  res.end(s);
}

function ledgerFilter(q: URLSearchParams, now: number): Omit<AuditFilter, 'afterSeq'> {
  const f: Omit<AuditFilter, 'afterSeq'> = {};
  for (const k of ['server', 'tool', 'principal', 'group', 'outcome', 'method', 'requestId', 'client'] as const) {
    const v = q.get(k);
    if (v) f[k] = v;
  }
  // A misspelt outcome matched no row, an empty answer that reads as "no such calls"
  // (`ledger query --outcome` refuses it the same way).
  if (f.outcome !== undefined && !(SHOWN_OUTCOMES as readonly string[]).includes(f.outcome)) throw new BadQuery(`outcome must be one of ${SHOWN_OUTCOMES.join(', ')}`);
  // As `ledger query --request-id` takes it: `1` the number, `"1"` the string.
  if (f.requestId !== undefined) {
    try {
      f.requestId = requestIdQuery(f.requestId).stored;
    } catch (err) {
      throw new BadQuery((err as Error).message); // a number past 2^53: it would select another id
    }
  }
  // A W3C trace id as `ledger query --trace-id` takes it: any other text would match no row.
  const trace = q.get('traceId');
  if (trace) {
    const id = traceIdQuery(trace);
    if (id === undefined) throw new BadQuery('traceId must be a W3C trace id, 32 hex digits');
    f.traceId = id;
  }
  for (const k of ['since', 'until'] as const) {
    const v = q.get(k);
    if (!v) continue;
    try {
      f[k] = parseWhen(v, now);
    } catch (err) {
      throw new BadQuery((err as Error).message);
    }
  }
  const int = (k: string): number | undefined => {
    const v = q.get(k);
    if (v === null || v === '') return undefined;
    if (!/^\d+$/.test(v)) throw new BadQuery(`${k} must be a non-negative integer`);
    return Number(v);
  };
  const limit = int('limit');
  if (limit === 0) throw new BadQuery(`limit must be from 1 to ${MAX_LEDGER_ROWS}`);
  f.limit = Math.min(limit ?? 100, MAX_LEDGER_ROWS);
  const afterId = int('afterId');
  if (afterId !== undefined) f.afterId = afterId;
  return f;
}

export class AdminRoutes {
  readonly events: AdminEvents;
  readonly tickets = new AdminTickets();

  constructor(
    private readonly hub: AdminHub,
    private readonly policy: OriginPolicy,
    private readonly log: Logger,
    /** Authentication is on: the edge checked the admin scope already, so no loopback rule. */
    private readonly authenticated = false,
  ) {
    this.events = new AdminEvents(hub.events, () => ({ version: VERSION, servers: this.servers() }), log);
  }

  /**
   * Hook for the WebSocket upgrade of /admin/events on the hub's listener. `authorize` (with
   * authentication on) answers 200, or 401/403 for a caller without the admin scope. A
   * `?ticket=` from POST /admin/ticket stands in for the credential, once (AdminTickets).
   */
  attach(server: Server, authorize?: (req: IncomingMessage) => Promise<Admission>, local = false): void {
    this.events.attach(server, async (req): Promise<Admission> => {
      if (!hostAllowed(req.headers.host, this.policy) || !adminOriginAllowed(req.headers.origin, req.headers.host, this.policy)) return { status: 403 };
      const ticket = new URL(req.url ?? '/', 'http://x').searchParams.get('ticket');
      let admitted: Admission = { status: 200 };
      if (ticket !== null) {
        const redeemed = this.tickets.redeem(ticket);
        admitted = redeemed ? { status: 200, expiresAt: redeemed.credentialExpiresAt, lapse: redeemed.lapse } : { status: 401 };
      } else if (authorize) admitted = await authorize(req);
      if (admitted.status !== 200) return admitted;
      return this.operator(req, local) ? admitted : { status: 403 };
    });
  }

  close(): void {
    this.events.close();
  }

  /** `local`: the request came over the admin socket (listen.admin.path, mode 0600), which only the hub's user can open. */
  private operator(req: IncomingMessage, local: boolean): boolean {
    return this.authenticated || local || isAdmin(req);
  }

  servers() {
    return serverViews(this.hub.handles.values(), (id) => this.hub.catalog.cache.peek(`${id}\0tools`)?.items.length, (h) => this.hub.instructionsVerdict?.(h), (id) => this.hub.catalog.listError(id), (id) => this.hub.upstreams?.down(id) ?? []);
  }

  /** The config's servers that are turned off: they run nowhere, but an operator should see them. */
  private disabled(): string[] {
    return Object.values(this.hub.config.servers)
      .filter((s) => !s.enabled)
      .map((s) => s.id);
  }

  /** Handles /metrics and /admin/…; false for any other path (the caller goes on routing). `local` as for operator(). */
  async route(req: IncomingMessage, res: ServerResponse, path: string, who?: Identity, local = false): Promise<boolean> {
    if (path !== '/metrics' && path !== '/admin' && !path.startsWith('/admin/')) return false;
    if (!this.operator(req, local)) {
      json(res, 403, { error: 'admin routes need an admin principal' });
      return true;
    }
    if (!adminOriginAllowed(req.headers.origin, req.headers.host, this.policy)) {
      json(res, 403, { error: 'admin routes take a browser request only from a page of this hub (or of listen.allowedOrigins)' });
      return true;
    }
    if (path === '/admin/reload') {
      // POST: it changes what the hub runs, so no prefetch or link may set it off.
      if (req.method !== 'POST') res.writeHead(405, { allow: 'POST' }).end();
      else await this.reload(res, who);
      return true;
    }
    const restart = /^\/admin\/servers\/([^/]+)\/restart$/.exec(path);
    if (restart) {
      // POST: it cuts a connection, so no prefetch or link may set it off.
      if (req.method !== 'POST') res.writeHead(405, { allow: 'POST' }).end();
      else this.restart(res, restart[1]!, who);
      return true;
    }
    if (path === '/admin/pins/changed') {
      // POST: it makes the hub read the pin table, so no prefetch or link may set it off.
      if (req.method !== 'POST') res.writeHead(405, { allow: 'POST' }).end();
      else this.pinsChanged(res);
      return true;
    }
    if (path === '/admin/ticket') {
      // POST: it hands out something that works once, so no prefetch or link may take it.
      if (req.method !== 'POST') res.writeHead(405, { allow: 'POST' }).end();
      else json(res, 200, this.tickets.issue(who?.expiresAt, who?.lapse));
      return true;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return true;
    }
    const q = new URL(req.url ?? '/', 'http://x').searchParams;
    try {
      switch (path) {
        case '/metrics': {
          const metrics = this.hub.metrics;
          if (!metrics) return false;
          const text = await metrics.text();
          res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
          res.end(text);
          return true;
        }
        case '/admin':
          res.writeHead(308, { location: '/admin/' }).end();
          return true;
        case '/admin/servers':
          json(res, 200, { version: VERSION, pid: process.pid, servers: this.servers(), disabled: this.disabled() });
          return true;
        case '/admin/tools': {
          const group = q.get('group') ?? undefined;
          if (group !== undefined && !this.hub.catalog.groups.has(group)) {
            json(res, 404, { error: `no tool group named "${group}"` });
            return true;
          }
          const server = q.get('server') ?? undefined;
          if (server !== undefined && !this.hub.handles.has(server)) {
            json(res, 404, { error: `no server named "${server}" (servers: ${[...this.hub.handles.keys()].join(', ') || 'none'})` });
            return true;
          }
          // ?kind=prompts|resources|resourceTemplates: those items instead, as { kind, items } (an older daemon answers tools, without `kind`).
          const kind = q.get('kind') ?? 'tools';
          const filter = { server, group, all: q.get('all') === '1' };
          if (kind === 'prompts' || kind === 'resources' || kind === 'resourceTemplates') {
            json(res, 200, { kind, items: await itemViews(this.hub.catalog, kind, this.hub.config.names.mode, filter) });
            return true;
          }
          if (kind !== 'tools') throw new BadQuery(`kind must be tools, prompts, resources or resourceTemplates, not ${JSON.stringify(kind.slice(0, 40))}`);
          const tools = await toolViews(this.hub.catalog, this.hub.config.names.mode, filter, (n) => this.hub.validator?.flagged.get(n));
          json(res, 200, { tools });
          return true;
        }
        case '/admin/ledger':
          return this.ledger(res, q);
        case '/admin/events':
          // 426 names the protocol to switch to (RFC 9110 §15.5.22).
          json(res, 426, { error: 'connect with a WebSocket' }, { upgrade: 'websocket', connection: 'Upgrade' });
          return true;
      }
      const file = PAGE_FILES[path];
      if (!file) {
        json(res, 404, { error: 'not found' });
        return true;
      }
      const body = await readFile(join(ADMIN_PAGE_DIR, file));
      res.writeHead(200, { ...PAGE_HEADERS, 'content-type': TYPES[file.split('.').pop()!], 'content-length': body.length });
      res.end(req.method === 'HEAD' ? undefined : body);
      return true;
    } catch (err) {
      if (err instanceof BadQuery) json(res, 400, { error: err.message });
      else {
        this.log.error({ err, path }, 'admin route failed');
        json(res, 500, { error: 'internal error' });
      }
      return true;
    }
  }

  private restart(res: ServerResponse, encoded: string, who: Identity | undefined): void {
    let id: string;
    try {
      id = decodeURIComponent(encoded);
    } catch {
      json(res, 400, { error: 'the server id in the path is not valid percent-encoding' });
      return;
    }
    if (!this.hub.restartServer || !this.hub.handles.has(id)) {
      const off = this.hub.config.servers[id]?.enabled === false;
      json(res, 404, { error: off ? `server "${id}" is disabled in the config: enable it there and reload` : `no server "${id}" is running (switchyard servers lists them)` });
      return;
    }
    this.log.info({ server: id, principal: who?.principal }, 'server restart requested (POST /admin/servers/<id>/restart)');
    try {
      this.hub.restartServer(id);
    } catch (err) {
      json(res, 500, { error: `server "${id}" could not be restarted; it runs on as it was: ${(err as Error).message}` });
      return;
    }
    json(res, 200, { restarted: id });
  }

  /**
   * The CLI approved a pin change (`switchyard tools approve`): read the changed rows now, not
   * at the next poll (PIN_POLL_MS). What changed is read from the ledger, never from the
   * request, so a caller can only make the hub look sooner.
   */
  private pinsChanged(res: ServerResponse): void {
    const look = this.hub.ledger.lookForPinChanges;
    if (!look) {
      json(res, 404, { error: 'the ledger is disabled (ledger.enabled: false): pins are kept in memory' });
      return;
    }
    json(res, 200, { changed: look.call(this.hub.ledger) });
  }

  private async reload(res: ServerResponse, who: Identity | undefined): Promise<void> {
    const reload = this.hub.reloadConfigFile;
    if (!reload) {
      json(res, 404, { error: 'this hub has no config file to reload' });
      return;
    }
    this.log.info({ principal: who?.principal }, 'config reload requested (POST /admin/reload)');
    const outcome = await reload();
    json(res, RELOAD_STATUS[outcome.status], outcome);
  }

  private ledger(res: ServerResponse, q: URLSearchParams): boolean {
    const l = this.hub.ledger as AuditSink & Partial<Queryable>;
    if (typeof l.queryPages !== 'function') {
      json(res, 404, { error: 'the ledger is disabled (ledger.enabled: false)' });
      return true;
    }
    // requestId as `ledger query --json` gives it: as sent (the number 1, the string "1"), its
    // type beside it. The text a row stores (a string of digits in its JSON form, `"1"`) was
    // shown, a JSON string for every id, read as the string it held.
    const rows: unknown[] = [];
    let bodies = 0;
    let truncated = false;
    pages: for (const page of l.queryPages(ledgerFilter(q, Date.now()))) {
      for (const r of page) {
        const size = (r.argsJson?.length ?? 0) + (r.resultJson?.length ?? 0);
        if (rows.length > 0 && bodies + size > MAX_LEDGER_BODY_CHARS) {
          truncated = true;
          break pages;
        }
        bodies += size;
        rows.push({ ...r, ...requestIdJson(r) });
      }
    }
    json(res, 200, truncated ? { rows, truncated } : { rows });
    return true;
  }
}
