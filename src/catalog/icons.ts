/**
 * The icons of an untrusted server's tools, prompts and resources. The schema asks a client to
 * load an icon only from the server's own domain (or one it trusts) and to take care with SVG,
 * which can carry script. Behind the hub every item seems to come from the hub, so the client
 * can no longer tell whose domain an icon is on: the hub judges for it. Kept: raster images as
 * `data:` URIs, `https:` icons on the site of an HTTP server's own URL, and `http:` ones of its
 * own origin. Dropped: any other URL or scheme (`file:`, `javascript:`), SVG, and for a stdio server, which has no domain,
 * every URL: each would have the client's IDE fetch an address the server chose (a beacon).
 * A trusted server's icons pass as they are.
 */

const RASTER_DATA = /^data:image\/(?:png|jpeg|jpg|gif|webp)(?:;[^,]*)?,/i;

/** The last labels of a host that name its site: two, or three under a two-letter country code with a second level (`example.co.uk`). */
function siteOf(host: string): string {
  const labels = host.toLowerCase().replace(/\.$/, '').split('.');
  const n = labels.length >= 3 && labels.at(-1)!.length === 2 && labels.at(-2)!.length <= 3 ? 3 : 2;
  return labels.slice(-n).join('.');
}

/** Whether an untrusted server at `serverUrl` (undefined: stdio) may show an icon of this `src`. */
export function iconAllowed(src: unknown, serverUrl: string | undefined): boolean {
  if (typeof src !== 'string') return false;
  if (RASTER_DATA.test(src)) return true;
  if (serverUrl === undefined) return false;
  let icon: URL;
  let server: URL;
  try {
    icon = new URL(src);
    server = new URL(serverUrl);
  } catch {
    return false;
  }
  if (icon.username || icon.password || /\.svgz?$/i.test(icon.pathname)) return false;
  // Plain http only from the server's own origin (a server on loopback serving its icons).
  if (icon.protocol === 'http:') return icon.origin === server.origin;
  return icon.protocol === 'https:' && siteOf(icon.hostname) === siteOf(server.hostname);
}

/** `item` with only the icons an untrusted server may show (the same object when all are kept or it has none). */
export function withScreenedIcons(item: Record<string, unknown>, serverUrl: string | undefined): Record<string, unknown> {
  const icons = item.icons;
  if (icons === undefined) return item;
  if (!Array.isArray(icons)) {
    const { icons: _dropped, ...rest } = item;
    return rest;
  }
  const kept = icons.filter((i) => i !== null && typeof i === 'object' && !/svg/i.test(String((i as { mimeType?: unknown }).mimeType ?? '')) && iconAllowed((i as { src?: unknown }).src, serverUrl));
  if (kept.length === icons.length) return item;
  if (kept.length === 0) {
    const { icons: _dropped, ...rest } = item;
    return rest;
  }
  return { ...item, icons: kept };
}

/** A content block with only the icons an untrusted server may show (the same object when none go). */
function screenedBlock(block: unknown, serverUrl: string | undefined): unknown {
  return block !== null && typeof block === 'object' && (block as { icons?: unknown }).icons !== undefined ? withScreenedIcons(block as Record<string, unknown>, serverUrl) : block;
}

/**
 * A tool result (`content`) or a prompt (`messages[].content`) of an untrusted server, its
 * content blocks' icons screened as its listed items' are: a `resource_link` carries a
 * resource's icons, which the client shows as the listed ones. The same object when no block has
 * an icon to drop (the usual result: one pass over its blocks, nothing copied).
 */
export function withScreenedContentIcons(result: Record<string, unknown>, serverUrl: string | undefined): Record<string, unknown> {
  const content = result.content;
  if (Array.isArray(content)) {
    let screened: unknown[] | undefined;
    for (let i = 0; i < content.length; i++) {
      const kept = screenedBlock(content[i], serverUrl);
      if (kept !== content[i]) (screened ??= [...content])[i] = kept;
    }
    return screened ? { ...result, content: screened } : result;
  }
  const messages = result.messages;
  if (!Array.isArray(messages)) return result;
  let screened: unknown[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as { content?: unknown } | null;
    if (m === null || typeof m !== 'object') continue;
    const kept = screenedBlock(m.content, serverUrl);
    if (kept !== m.content) (screened ??= [...messages])[i] = { ...m, content: kept };
  }
  return screened ? { ...result, messages: screened } : result;
}
