import { isLoopbackHost } from '../downstream/origin.js';

/**
 * Without authentication the hub serves whoever reaches it, so it may listen only on loopback.
 * Returns the refusal to print, or undefined when listening on `host` is fine.
 */
export function exposureProblem(host: string, authRequired: boolean): string | undefined {
  if (authRequired) return undefined;
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (isLoopbackHost(h)) return undefined;
  return `refusing to listen on ${host} without authentication: anyone who can reach it could use every upstream. Configure auth.apiKeys (switchyard keys add PRINCIPAL) or auth.oauth, or listen on 127.0.0.1.`;
}
