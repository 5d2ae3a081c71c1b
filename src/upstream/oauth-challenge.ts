/** The Bearer challenge of an upstream's 401 or 403 (RFC 6750 §3, RFC 9728 §5.1). */

/** The Bearer parameters of a WWW-Authenticate header (RFC 6750 §3, RFC 9728 §5.1). */
export interface BearerChallenge {
  resourceMetadata?: string;
  scope?: string[];
  error?: string;
  /** `error_description`: the server's words for `error`, as sent (untrusted text). */
  description?: string;
}

/** The Bearer challenge of a WWW-Authenticate header, if it has one. */
export function parseBearerChallenge(header: string | string[] | undefined): BearerChallenge | undefined {
  const text = Array.isArray(header) ? header.join(', ') : header;
  if (!text) return undefined;
  const at = /(?:^|[\s,])Bearer(?:\s+|$)/i.exec(text);
  if (!at) return undefined;
  const rest = text.slice(at.index + at[0].length);
  const out: BearerChallenge = {};
  // auth-param = token BWS "=" BWS ( token / quoted-string ); a new scheme (a token not followed by "=") ends the list.
  const param = /\s*,?\s*([A-Za-z0-9_.-]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^\s,"]*)\s*/y;
  for (let m = param.exec(rest); m; m = param.exec(rest)) {
    const value = m[3] !== undefined ? m[3].replace(/\\(.)/g, '$1') : m[2]!;
    const name = m[1]!.toLowerCase();
    if (name === 'resource_metadata') out.resourceMetadata = value;
    else if (name === 'scope') out.scope = value.split(' ').filter((s) => s.length > 0);
    else if (name === 'error') out.error = value;
    else if (name === 'error_description') out.description = value;
  }
  return out;
}
