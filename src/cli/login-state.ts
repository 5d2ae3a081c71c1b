/**
 * What `switchyard doctor` says of each server whose `oauth.grant` is "authorization_code": a
 * login stored and usable, or what the user must do (`switchyard login <id>`). Read from the
 * token file alone (never shown: it holds bearer and refresh tokens), so it answers with no
 * daemon running, before the first call would fail.
 */
import { readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { configuredServer } from '../config/load.js';
import type { HubConfig } from '../config/types.js';
import { canonicalResource } from '../upstream/oauth-discovery.js';
import { clientFileOf, readTokenFile } from '../upstream/oauth-token-store.js';
import type { Finding } from './doctor.js';
import { screenText } from '../ledger/format.js';
import { stateDir } from '../paths.js';

export function loginFindings(config: HubConfig, now = Date.now()): Finding[] {
  const out: Finding[] = [];
  for (const s of Object.values(config.servers)) {
    if (s.oauth?.grant !== 'authorization_code' || s.oauthTokenFile === undefined || s.url === undefined || s.enabled === false) continue;
    const file = s.oauthTokenFile;
    const fix = `run \`switchyard login ${s.id}\``;
    const read = readTokenFile(file);
    const t = read.tokens;
    if (read.problem !== undefined) out.push({ level: 'fail', check: 'login', message: `servers.${s.id}: the stored login is unusable (${read.problem}); ${fix}` });
    else if (t === undefined) out.push({ level: 'warn', check: 'login', message: `servers.${s.id}: no login stored (oauth.grant authorization_code): its calls fail until you ${fix}` });
    else if (t.serverUrl !== canonicalResource(s.url)) out.push({ level: 'warn', check: 'login', message: `servers.${s.id}: the stored login is for ${t.serverUrl}, not for its url; ${fix}` });
    else if (t.expiresAt !== undefined && t.expiresAt <= now && t.refreshToken === undefined)
      out.push({ level: 'warn', check: 'login', message: `servers.${s.id}: the stored access token expired and there is no refresh token; ${fix}` });
    else {
      const life = t.expiresAt === undefined ? 'no expiry given' : t.expiresAt <= now ? 'expired, refreshed at the next call' : `expires in ${Math.round((t.expiresAt - now) / 60_000)} min`;
      out.push({ level: 'ok', check: 'login', message: `servers.${s.id}: logged in (${life}${t.refreshToken ? ', refreshable' : ''})` });
    }
    // Created 0600; one widened since (a copy, a restore) lets other local users take the tokens,
    // or the registered client's secret (kept beside them, across logouts).
    for (const f of [file, clientFileOf(file)]) {
      const mode = fileMode(f);
      if (mode !== undefined && (mode & 0o077) !== 0)
        out.push({ level: 'warn', check: 'login', message: `servers.${s.id}: ${f} is readable by other users (mode ${(mode & 0o777).toString(8)}): \`chmod 600\` it` });
    }
  }
  out.push(...leftLogins(config));
  return out;
}

/**
 * Logins stored for servers that no longer log in (oauth.grant changed, or the server removed):
 * no daemon uses them, but their refresh tokens stay valid until revoked, and only a logout
 * (which finds them where the state directory keeps them) does it.
 */
function leftLogins(config: HubConfig): Finding[] {
  const dir = join(stateDir(config.ledger.path, config.file !== undefined ? dirname(config.file) : process.cwd()), 'oauth-tokens');
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  const out: Finding[] = [];
  for (const name of names) {
    const m = /^([^.]+)\.json$/.exec(name);
    if (m === null) continue;
    let id: string;
    try {
      id = decodeURIComponent(m[1]!);
    } catch {
      continue;
    }
    const s = configuredServer(config, id);
    if (s?.oauth?.grant === 'authorization_code' && s.url !== undefined) continue;
    if (readTokenFile(join(dir, name)).tokens === undefined) continue;
    const why = s === undefined ? `the config has no server "${id}"` : `servers.${id} no longer logs in (no oauth.grant "authorization_code")`;
    out.push({ level: 'warn', check: 'login', message: `${screenText(why)}, but a login of it is stored in ${join(dir, name)}: its refresh token stays valid until revoked; run \`switchyard logout ${screenText(id)}\`` });
  }
  return out;
}

function fileMode(file: string): number | undefined {
  try {
    return statSync(file).mode;
  } catch {
    return undefined;
  }
}
