/**
 * RFC 6750 challenges and RFC 9728 Protected Resource Metadata (digest §7).
 */
export const PRM_PATH = '/.well-known/oauth-protected-resource';

/** Where clients find the metadata of `resource`: the well-known prefix inserted before its path. */
export function resourceMetadataUrl(resource: string): string {
  const u = new URL(resource);
  const path = u.pathname === '/' ? '' : u.pathname.replace(/\/+$/, '');
  return `${u.origin}${PRM_PATH}${path}`;
}

function quote(v: string): string {
  // auth-param values are quoted-strings; keep them to printable ASCII without quotes or backslashes.
  return `"${v.replace(/[^\x20-\x7e]|["\\]/g, '')}"`;
}

/** `Bearer k="v", …`, leaving out absent parameters. */
export function bearerChallenge(params: Record<string, string | undefined>): string {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${k}=${quote(v!)}`);
  return parts.length ? `Bearer ${parts.join(', ')}` : 'Bearer';
}

export interface PrmInput {
  resource: string;
  issuer: string;
  scopes: string[];
}

export function protectedResourceMetadata(p: PrmInput): Record<string, unknown> {
  const doc: Record<string, unknown> = {
    resource: p.resource,
    authorization_servers: [p.issuer],
    bearer_methods_supported: ['header'],
    resource_name: 'Switchyard MCP hub',
  };
  if (p.scopes.length) doc.scopes_supported = p.scopes;
  return doc;
}
