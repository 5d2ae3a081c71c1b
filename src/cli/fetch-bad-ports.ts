/**
 * The ports the Fetch standard blocks (https://fetch.spec.whatwg.org/#block-bad-port): fetch
 * (Node's, undici's, every browser's) refuses to connect to them, with "bad port" and nothing
 * else. The CLI asks the daemon with fetch, and so do most MCP clients (the SDKs' HTTP
 * transports, the status page in a browser): a hub listening on one of these is out of their reach.
 */
import type { HubConfig } from '../config/types.js';

const BAD_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135,
  137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720,
  1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/** Whether fetch refuses to connect to `port`. */
export function fetchRefusesPort(port: number): boolean {
  return BAD_PORTS.has(port);
}

const WHY = 'fetch refuses to connect to it (a "bad port" of the Fetch standard), so switchyard\'s CLI, browsers and MCP clients built on fetch cannot reach a hub there';

/** The warnings for a config's listeners on such ports: `port` the MCP listener's (start --port, else listen.port). */
export function badPortWarnings(config: Pick<HubConfig, 'listen'>, port = config.listen.port, named = 'listen.port'): string[] {
  const out: string[] = [];
  if (fetchRefusesPort(port)) out.push(`${named} ${port}: ${WHY}; choose another port`);
  const admin = config.listen.admin;
  if (admin && 'port' in admin && fetchRefusesPort(admin.port)) out.push(`listen.admin.port ${admin.port}: ${WHY}; choose another port`);
  return out;
}

/** What the CLI says when fetch refused the daemon's address (`base`, of port `port`). */
export function badPortRefusal(base: string, port: number): string {
  return `${base}: port ${port}: ${WHY}; give the hub's listen.port (or listen.admin.port) another one`;
}
