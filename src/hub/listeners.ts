/**
 * The hub's HTTP listeners: the MCP listener with the operator's routes (listen()), and the
 * operator's own listener (listen.admin: a port, or a socket file). Made once `start` asks for
 * them (`switchyard stdio` has none), stopped taking work as the stop begins and closed at its
 * end, after the upstreams: the calls those fail still answer on them.
 */
import type { AddressInfo } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { Logger } from '../log.js';
import type { HubConfig } from '../config/types.js';
import type { Catalog } from '../catalog/catalog.js';
import type { HubCore } from '../downstream/core.js';
import { AdminRoutes, type AdminHub } from '../downstream/admin.js';
import type { Endpoint } from '../downstream/endpoint.js';
import { HttpServer } from '../downstream/http-server.js';
import { takeSocketPath, type AdminSocket } from '../downstream/admin-socket.js';
import type { Admission } from '../downstream/admin-events.js';
import { adminMaxConnections, defaultMaxConnections } from '../transport/connection-cap.js';
import { credentialHeaders, type Authenticator } from '../auth/authenticator.js';
import { exposureProblem } from '../auth/exposure.js';
import type { EdgeGate } from '../policy/gate.js';

/** What the listeners serve and look at, all of it the hub's, given once. */
export interface ListenerSources {
  /** The running config (its `listen` section is read as each listener is made). */
  readonly config: HubConfig;
  /** What the listeners serve: the hub itself, as the MCP edge and the admin routes see it. */
  readonly hub: HubCore & AdminHub;
  readonly endpoint: Endpoint;
  readonly auth: Authenticator;
  readonly gate: EdgeGate;
  /** Its groups as they are when a listener is made. */
  readonly catalog: Pick<Catalog, 'groups'>;
  /** Makes the hub's /metrics, once: before the listener serves (and before startUpstreams), so no call is missed. */
  metricsReady(): Promise<void>;
  readonly log: Logger;
}

export class Listeners {
  private http: HttpServer | undefined;
  /** The admin listener (listen.admin), made by listenAdmin(). */
  private adminHttp: HttpServer | undefined;
  /** The admin listener's socket file (listen.admin.path), removed at stop. */
  private adminSocket: AdminSocket | undefined;
  private adminRoutes: AdminRoutes | undefined;

  constructor(private readonly src: ListenerSources) {}

  /** The operator's routes, once listen() has made them. */
  get admin(): AdminRoutes | undefined {
    return this.adminRoutes;
  }

  async listen(host: string, port: number): Promise<AddressInfo> {
    const { config, auth, log } = this.src;
    const exposed = exposureProblem(host, auth.required);
    if (exposed) throw new Error(exposed);
    await auth.prepare();
    await this.src.metricsReady();
    const policy = { listenHost: host, allowedOrigins: config.listen.allowedOrigins };
    const admin = (this.adminRoutes = new AdminRoutes(this.src.hub, policy, log, auth.required));
    // With an admin listener of its own, its connections come out of the default cap's share.
    const maxConnections = config.listen.maxConnections ?? (config.listen.admin ? defaultMaxConnections(undefined, adminMaxConnections()) : undefined);
    // listen.admin.exclusive: the operator routes only where the operator alone can reach them.
    const operatorRoutesElsewhere = config.listen.admin?.exclusive === true;
    this.http = new HttpServer(
      this.src.endpoint,
      this.src.hub,
      { ...config.listen, maxConnections, listenHost: host, port, routes: (req, res, path, who) => admin.route(req, res, path, who), gate: this.src.gate, groups: this.src.catalog.groups, operatorRoutesElsewhere },
      log,
    );
    if (!operatorRoutesElsewhere) admin.attach(this.http.server, this.authorizeAdminEvents);
    const addr = await this.http.listen(host, port);
    auth.bindAudience(`http://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}/mcp`);
    return addr;
  }

  /** The live feed shows every principal's calls: with authentication on, only to an admin. */
  private readonly authorizeAdminEvents = async (req: IncomingMessage): Promise<Admission> => {
    const who = await this.src.auth.authenticate(credentialHeaders(req));
    if (!who.ok) return { status: who.status };
    return this.src.auth.checkAdmin(who) ? { status: 403 } : { status: 200, expiresAt: who.expiresAt, lapse: who.lapse };
  };

  /**
   * The operator's own listener (listen.admin), once listen() has run: the admin routes and
   * /healthz, on connections counted apart from the MCP listener's (a flood of MCP clients at
   * listen.maxConnections does not lock the operator out). Its address (a socket's path, or
   * its http:// base); undefined without one. Authentication is as on the main listener; without it,
   * a connection over the socket (mode 0600) is the operator's, as a loopback one is.
   */
  async listenAdmin(): Promise<string | undefined> {
    const { config, auth, log } = this.src;
    const at = config.listen.admin;
    const admin = this.adminRoutes;
    if (!at || !admin) return undefined;
    const local = 'path' in at;
    const host = local ? 'localhost' : (at.host ?? '127.0.0.1');
    if (!local) {
      const exposed = exposureProblem(host, auth.required);
      if (exposed) throw new Error(`listen.admin: ${exposed}`);
    }
    const policy = { listenHost: host, allowedOrigins: config.listen.allowedOrigins };
    const http = (this.adminHttp = new HttpServer(
      this.src.endpoint,
      this.src.hub,
      { ...config.listen, ...policy, port: local ? 0 : at.port, adminOnly: true, routes: (req, res, path, who) => admin.route(req, res, path, who, local), gate: this.src.gate, groups: this.src.catalog.groups },
      log,
    ));
    admin.attach(http.server, this.authorizeAdminEvents, local);
    if (local) {
      this.adminSocket = await takeSocketPath(at.path, (p) => http.listenPath(p));
      return at.path;
    }
    const addr = await http.listen(host, at.port);
    return `http://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}`;
  }

  /** New work is refused from now on (the stop's beginning); what is in flight goes on. */
  stopAccepting(): void {
    this.http?.stopAccepting();
    this.adminHttp?.stopAccepting();
  }

  /** Both listeners closed (the stop's end, the upstreams closed first). */
  async close(): Promise<void> {
    await this.http?.close();
    await this.adminHttp?.close();
  }

  /** The admin socket's file removed (the stop, once the listeners are closed). */
  async releaseSocket(): Promise<void> {
    await this.adminSocket?.release();
  }
}
