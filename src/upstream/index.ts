/**
 * The upstream edge: one connection per configured MCP server, whatever its transport and era.
 */
import type { Logger } from '../log.js';
import { HttpUpstream } from './http-upstream.js';
import type { UpstreamOptions } from './lifecycle.js';
import { StdioUpstream } from './stdio-upstream.js';
import type { Upstream, UpstreamSpec } from './types.js';

export type { CallOptions, Upstream, UpstreamSpec, UpstreamState } from './types.js';
export type { UpstreamOptions } from './lifecycle.js';
export type { BackoffOptions } from './backoff.js';
export { HUB_CLIENT_INFO, LEGACY_CLIENT_CAPABILITIES } from './envelope.js';
export { StdioUpstream } from './stdio-upstream.js';
export { HttpUpstream } from './http-upstream.js';

/** A stdio upstream when the spec has a command, an HTTP one when it has a url. Not started. */
export function createUpstream(spec: UpstreamSpec, log: Logger, opts?: UpstreamOptions): Upstream {
  if (spec.command && spec.url) throw new Error(`server "${spec.id}": give either a command or a url, not both`);
  if (spec.command) return new StdioUpstream(spec, log, opts);
  if (spec.url) return new HttpUpstream(spec, log, opts);
  throw new Error(`server "${spec.id}": needs a command (stdio) or a url (HTTP)`);
}
