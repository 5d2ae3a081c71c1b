import type { HubConfig } from '../config/types.js';
import { isLoopbackHost } from '../downstream/origin.js';
import { authRequired } from './authenticator.js';

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

/**
 * The refusal `start` gives for this config listening on `host` (by default the config's
 * listen.host, as start without --host): one check for start, `config validate` and `doctor`,
 * so that neither says ok to a config start refuses.
 */
export function configExposureProblem(config: HubConfig, host: string = config.listen.host): string | undefined {
  return exposureProblem(host, authRequired(config.auth));
}

/** The same refusal for a TCP admin listener (listen.admin.host; a unix socket is no network address). */
export function adminExposureProblem(config: HubConfig): string | undefined {
  const admin = config.listen.admin;
  return admin && 'port' in admin ? exposureProblem(admin.host ?? '127.0.0.1', authRequired(config.auth)) : undefined;
}
