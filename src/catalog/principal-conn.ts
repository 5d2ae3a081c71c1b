/**
 * How a principal's own upstream connection is named: the credential of its list partition in
 * the catalog, and the `conn` of its resource subscriptions (src/router/subscriptions.ts). ''
 * names a server's own connection.
 */
import type { ServerHandle } from './types.js';

const PREFIX = 'principal:';

/** The name of a principal's own connection. */
export function principalConn(principal: string): string {
  return PREFIX + principal;
}

/** The principal whose own connection `conn` names. */
export function principalOfConn(conn: string): string {
  return conn.slice(PREFIX.length);
}

/** Whether some principal has credentials of its own to the server (`servers.<id>.credentials`): another account upstream, its lists that principal's. */
export function hasPrincipalCredentials(h: ServerHandle): boolean {
  for (const _ in h.config.credentials ?? {}) return true;
  return false;
}
