/**
 * Settings a config may hold that the hub ignores where they stand. Not config errors: a hub
 * that ran with them must still start after an upgrade. Said instead where an operator looks:
 * the hub's log at start and at each reload, and `switchyard doctor`.
 */
import { shellReferences } from './shell-references.js';
import type { HubConfig } from './types.js';

export function ignoredSettings(config: Pick<HubConfig, 'servers' | 'groups'>): string[] {
  const out: string[] = [];
  for (const [id, s] of Object.entries(config.servers)) {
    // catalog/part.ts approves a changed tool at once only for a trusted server.
    if (s.autoApprove === true && s.trust !== 'trusted')
      out.push(`servers.${id}.autoApprove is ignored: it applies only to a server with "trust": "trusted", so this one's changed tools are quarantined all the same (set trust, or drop autoApprove)`);
  }
  // The HTTP client connects to the url's origin and path: a user name or password in it is
  // never sent (nor by the MCP SDKs' clients, whose fetch refuses such a url), and the server's
  // 401 then reads as a refused credential. Neither is quoted here: either may be the secret.
  for (const [id, s] of Object.entries(config.servers)) {
    if (typeof s.url !== 'string') continue;
    let u: URL;
    try {
      u = new URL(s.url);
    } catch {
      continue;
    }
    if (u.username !== '' || u.password !== '')
      out.push(`servers.${id}.url carries a user name or password, which the hub does not send: give the credential in servers.${id}.headers (e.g. "Authorization": "Basic <base64 of user:password>") and take it out of the url`);
  }
  // Two servers under one prefix: a name both list gets a hash suffix at the later one, and
  // `x__…` no longer tells a reader (or a policy rule written for it) whose tool it is.
  const byPrefix = new Map<string, string>();
  for (const [id, s] of Object.entries(config.servers)) {
    const prefix = s.prefix ?? id;
    if (prefix === '' || s.enabled === false) continue;
    const first = byPrefix.get(prefix);
    if (first === undefined) byPrefix.set(prefix, id);
    else out.push(`servers.${id} shares the prefix "${prefix}" with servers.${first}: the names both list get a hash suffix at one of them, and "${prefix}__…" no longer says which server a tool is (give each server a prefix of its own)`);
  }
  for (const [id, s] of Object.entries(config.servers)) out.push(...shellReferences(id, s));
  // A misspelt id leaves the group without that server's items, and nothing else would say so.
  for (const [name, g] of Object.entries(config.groups ?? {}))
    for (const id of g.servers ?? [])
      if (!Object.hasOwn(config.servers, id))
        out.push(`groups.${name}.servers names "${id}", which is not a configured server: /mcp/${name} shows nothing of it (servers: ${Object.keys(config.servers).join(', ') || 'none'})`);
  return out;
}
