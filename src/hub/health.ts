/**
 * The hub's health as /healthz, /admin/servers and `switchyard status` show it: whether it serves
 * calls now, why not, and each server's state.
 */
import type { Catalog } from '../catalog/catalog.js';
import { serverHealth, type ServerHealth } from '../catalog/describe.js';
import { failClosedBlocker, UNNAMED_BLOCKER } from '../router/fail-mode.js';
import type { LedgerCounters } from '../ledger/types.js';
import { monotonicNow } from '../monotonic.js';
import type { ServerHandles } from './server-handles.js';
import type { StartupGrace } from './startup-grace.js';

/**
 * How long /healthz answers "refusing" after a ledger write failed (none succeeding since).
 * Only a write finds out that the disk has room again, and a load balancer that took the hub
 * out of rotation on the 503 sends it none: past this, the hub is shown serving again, so that
 * the next call tries.
 */
const LEDGER_FAILURE_SHOWN_MS = 10_000;

/** What the health looks at, all of it the hub's, given once. */
export interface HealthSources {
  readonly handles: ServerHandles;
  readonly catalog: Catalog;
  readonly grace: Pick<StartupGrace, 'waitsForClosed' | 'ms'>;
  /** The ledger's last write failure, none succeeding since (undefined: writing, or no ledger). */
  ledgerWriteFailing(): LedgerCounters['writeFailing'];
}

export interface HubHealth {
  status: string;
  reason?: string;
  servers: ServerHealth[];
}

/**
 * "ok" only while the hub serves calls: "stopping" while it drains, "refusing" while a
 * failMode "closed" server is not ready (every call is refused then, whatever its server),
 * and while the ledger cannot write (every call it would forward is refused then).
 * `shows`: the servers the caller may know of (a key limited to tool groups); undefined: all.
 * `groups`: that key's groups, whose tools alone its counts count.
 */
export function hubHealth(src: HealthSources, draining: boolean, shows?: (server: string) => boolean, groups?: ReadonlySet<string>): HubHealth {
  // Counted from the shared tools list built last: built again (from the lists held, none
  // fetched) when it is not of them, in the background: the answers after this one count by it.
  if (groups) src.catalog.keepSharedToolsCurrent();
  const servers = [...src.handles.values()].filter((h) => !shows || shows(h.id)).map((h) => serverHealth(h, src.catalog, groups));
  if (draining) return { status: 'stopping', servers };
  const down = failClosedBlocker(src.handles.values());
  // A call waits then rather than being refused (StartupGrace.waitsForClosed): "starting", not
  // "refusing", still 503.
  if (down && src.grace.waitsForClosed()) {
    const who = !shows || shows(down.server) ? `server "${down.server}" (failMode "closed")` : 'a server it depends on (failMode "closed")';
    return { status: 'starting', reason: `the hub is starting: calls wait for ${who} to be ready, up to ${src.grace.ms / 1000} s from the hub's start`, servers };
  }
  if (down) return { status: 'refusing', reason: !shows || shows(down.server) ? down.message : UNNAMED_BLOCKER, servers };
  const ledger = src.ledgerWriteFailing();
  if (ledger && monotonicNow() - ledger.at < LEDGER_FAILURE_SHOWN_MS) {
    return { status: 'refusing', reason: `the audit ledger cannot write (${ledger.code}); the hub does not run calls it cannot record`, servers };
  }
  return { status: 'ok', servers };
}
