import { describe, expect, it } from 'vitest';
import { iconAllowed, withScreenedIcons } from '../../src/catalog/icons.js';

describe('iconAllowed (an untrusted server)', () => {
  const http = 'https://api.example.com/mcp';
  it('keeps raster data: URIs from any server, never SVG or other data', () => {
    for (const src of ['data:image/png;base64,AAAA', 'data:image/jpeg;base64,AAAA', 'data:image/webp,AAAA', 'DATA:IMAGE/GIF;base64,AAAA']) {
      expect(iconAllowed(src, undefined), src).toBe(true);
      expect(iconAllowed(src, http), src).toBe(true);
    }
    for (const src of ['data:image/svg+xml;base64,AAAA', 'data:text/html,<script>x</script>', 'data:,x']) expect(iconAllowed(src, http), src).toBe(false);
  });

  it("keeps https icons on the site of an HTTP server's URL, and http ones of its very origin", () => {
    expect(iconAllowed('https://api.example.com/icon.png', http)).toBe(true);
    expect(iconAllowed('https://cdn.example.com/icon.png', http)).toBe(true);
    expect(iconAllowed('https://example.com/icon.png', http)).toBe(true);
    expect(iconAllowed('https://cdn.shop.co.uk/i.png', 'https://api.shop.co.uk/mcp')).toBe(true);
    expect(iconAllowed('https://other.co.uk/i.png', 'https://api.shop.co.uk/mcp')).toBe(false);
    expect(iconAllowed('https://example.org/icon.png', http)).toBe(false);
    expect(iconAllowed('https://example.com.evil.net/icon.png', http)).toBe(false);
    expect(iconAllowed('https://api.example.com/icon.svg', http)).toBe(false);
    expect(iconAllowed('https://user:pw@api.example.com/icon.png', http)).toBe(false);
    expect(iconAllowed('http://api.example.com/icon.png', http)).toBe(false);
    expect(iconAllowed('http://127.0.0.1:3000/icon.png', 'http://127.0.0.1:3000/mcp')).toBe(true);
    expect(iconAllowed('http://127.0.0.1:3001/icon.png', 'http://127.0.0.1:3000/mcp')).toBe(false);
  });

  it('keeps no URL of a stdio server, and no other scheme', () => {
    expect(iconAllowed('https://api.example.com/icon.png', undefined)).toBe(false);
    for (const src of ['file:///etc/passwd', 'javascript:alert(1)', 'ftp://example.com/i.png', 'not a url', 42]) expect(iconAllowed(src, http), String(src)).toBe(false);
  });
});

describe('withScreenedIcons', () => {
  const png = { src: 'data:image/png;base64,AAAA' };
  it('returns the item itself when every icon stays or it has none', () => {
    const item = { name: 't', icons: [png] };
    expect(withScreenedIcons(item, undefined)).toBe(item);
    const bare = { name: 't' };
    expect(withScreenedIcons(bare, undefined)).toBe(bare);
  });

  it('drops the icons that may not be shown, an svg mimeType too, and the key when none is left or it is no list', () => {
    const svgTyped = { src: 'data:image/png;base64,AAAA', mimeType: 'image/svg+xml' };
    expect(withScreenedIcons({ name: 't', icons: [png, svgTyped, { src: 'https://x.example/i.png' }] }, undefined)).toEqual({ name: 't', icons: [png] });
    expect(withScreenedIcons({ name: 't', icons: [{ src: 'https://x.example/i.png' }, null, 'x'] }, undefined)).toEqual({ name: 't' });
    expect(withScreenedIcons({ name: 't', icons: 'https://x.example/i.png' }, undefined)).toEqual({ name: 't' });
  });
});
