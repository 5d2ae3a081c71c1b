/**
 * Upstream headers from the config (`servers.<id>.headers`, `servers.<id>.credentials.*.headers`)
 * checked at load instead of at each request: undici refuses a bad name or value only when a
 * request is built ("invalid header key"), so the server would never come up and the reason
 * would read like a network fault. Values are never repeated in a problem: they hold tokens.
 */

/** RFC 9110 `token`. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** RFC 9110 field-value characters as undici checks them: tab, visible ASCII, space, obs-text. */
const BAD_VALUE_CHAR = /[^\t\x20-\x7e\x80-\xff]/;

/**
 * Headers the hub or its HTTP client sets on each request (lower case): a configured value
 * would be overwritten, or would break the request's framing.
 */
const SET_BY_HUB = new Set([
  'accept',
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
  'mcp-session-id',
  'last-event-id',
]);

/** Whether the hub sets this header on each request itself (any case). */
export function setByHub(name: string): boolean {
  const lower = name.toLowerCase();
  return SET_BY_HUB.has(lower) || lower.startsWith('mcp-param-');
}

/**
 * A header name that is no token, said up to its first character that cannot be in one: past
 * it may be a token, when a header line was pasted as the name ("Authorization: Bearer …"),
 * and this line goes to the hub's log too when a reload refuses the file.
 */
function badName(path: string, name: string): string {
  if (name === '') return `${path}."": not a valid HTTP header name (it is empty)`;
  const i = [...name].findIndex((c) => !TOKEN.test(c));
  const c = [...name][i]!;
  const shown = i === 0 ? '' : [...name].slice(0, i).join('');
  const hint = c === ':' ? ': give the name as the key and what follows the colon as its value' : '';
  return `${path}.${shown}…: not a valid HTTP header name (character ${i + 1}, ${JSON.stringify(c)}, cannot be in one${hint})`;
}

/** One line per unusable header of one headers object, each naming its key path. */
export function headerMapProblems(path: string, headers: unknown): string[] {
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) return []; // the schema says so
  const out: string[] = [];
  const seen = new Map<string, string>();
  for (const [name, value] of Object.entries(headers)) {
    const at = `${path}.${name}`;
    const lower = name.toLowerCase();
    if (!TOKEN.test(name)) out.push(badName(path, name));
    else if (lower === '__proto__') out.push(`${at}: this name cannot be sent as a header`);
    else if (setByHub(name)) out.push(`${at}: set by the hub on each request; it cannot be configured`);
    else if (seen.has(lower)) out.push(`${at}: the same header as ${JSON.stringify(seen.get(lower))} (header names ignore case)`);
    seen.set(lower, name);
    if (typeof value === 'string' && BAD_VALUE_CHAR.test(value)) {
      out.push(`${at}: the value holds a character a header cannot carry (a line break, a control character, or one above U+00FF)`);
    }
  }
  return out;
}

/** Every server's `headers` and per-principal `credentials.*.headers` in a config document. */
export function headerProblems(value: unknown): string[] {
  const out: string[] = [];
  const root = (value ?? {}) as Record<string, unknown>;
  for (const key of ['servers', 'mcpServers']) {
    const servers = root[key];
    if (!servers || typeof servers !== 'object') continue;
    for (const [id, s] of Object.entries(servers)) {
      const server = (s ?? {}) as { headers?: unknown; credentials?: unknown; command?: unknown; url?: unknown; oauth?: unknown };
      out.push(...headerMapProblems(`${key}.${id}.headers`, server.headers));
      // Said, not ignored: an operator who wrote them expects each principal's calls kept apart.
      if (server.credentials !== undefined && server.command !== undefined && server.url === undefined)
        out.push(`${key}.${id}.credentials: per-principal credentials are headers sent to an HTTP upstream (url); a stdio server (command) is one process serving every principal, so they cannot apply`);
      if (server.oauth !== undefined) out.push(...oauthProblems(`${key}.${id}`, server));
      if (server.credentials && typeof server.credentials === 'object') {
        for (const [who, c] of Object.entries(server.credentials)) {
          out.push(...headerMapProblems(`${key}.${id}.credentials.${who}.headers`, (c as { headers?: unknown } | null)?.headers));
        }
      }
    }
  }
  return out;
}

/**
 * `oauth` beside what it cannot go with: a stdio server (no HTTP to carry a token), a static
 * Authorization header (one of the two would be sent, silently), per-principal credentials
 * (the token is the hub's own identity, the same for every principal).
 */
function oauthProblems(at: string, server: { headers?: unknown; credentials?: unknown; command?: unknown; url?: unknown }): string[] {
  const out: string[] = [];
  if (server.command !== undefined && server.url === undefined) out.push(`${at}.oauth: OAuth is for an HTTP upstream (url); a stdio server (command) takes no token`);
  const headers = server.headers !== null && typeof server.headers === 'object' ? Object.keys(server.headers) : [];
  if (headers.some((h) => h.toLowerCase() === 'authorization')) out.push(`${at}.oauth: the server also has an Authorization header; with oauth the hub sends the tokens it obtains, so remove one of the two`);
  if (server.credentials !== undefined) out.push(`${at}.oauth: per-principal credentials cannot go with oauth (the client-credentials token is the hub's own, the same for every principal); remove one of the two`);
  return out;
}
