/**
 * The status page at /admin/ in a real headless Chromium (Debian's chromium, driven by
 * playwright-core): it shows the upstreams with era and state and the catalog, and a call made
 * while it is open appears in its live feed (over /admin/events). A screenshot is kept in .tmp/.
 * With authentication on, the page asks for a credential and opens its feed with a ticket.
 */
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { sha256Hex } from '../helpers/auth.js';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';

// The functions given to waitForFunction/evaluate run in the page, not in Node: these name the
// little of the DOM they use (a DOM lib for the whole test program would make browser globals
// look valid in the Node code of every test).
interface PageElement {
  readonly textContent: string | null;
}
declare const document: {
  getElementById(id: string): PageElement | null;
  querySelectorAll(selectors: string): ArrayLike<PageElement> & Iterable<PageElement>;
};
declare const sessionStorage: { getItem(key: string): string | null };

const CHROMIUM = '/usr/bin/chromium';
const MODERN = '2026-07-28';

let hub: HubProcess;
let browser: Browser;
let page: Page;
let base: string;

async function call(name: string, args: Record<string, unknown>, on = hub, key?: string): Promise<Record<string, any>> {
  const res = await fetch(on.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/call',
      'mcp-name': name,
      ...(key ? { authorization: `Bearer ${key}` } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name, arguments: args, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'page-test', version: '1' } } },
    }),
  });
  return (await res.json()) as Record<string, any>;
}

beforeAll(async () => {
  hub = await startHub({
    servers: {
      notes: nodeServer('test/fixtures/servers/sdk1-server.mjs', [], { SERVER_NAME: 'notes-legacy' }),
      clock: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs', [], { SERVER_NAME: 'clock-modern' }),
    },
  });
  base = new URL(hub.url).origin;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await hub?.stop();
});

describe('status page', () => {
  it('shows the upstreams with era and state, and the catalog', async () => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${base}/admin/`);
    await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live', undefined, { timeout: 15_000 });
    // Wait until both upstreams are ready on the page (they may still be starting).
    await page.waitForFunction(
      () => [...document.querySelectorAll('#servers tbody tr')].filter((r) => r.textContent?.includes('ready')).length === 2,
      undefined,
      { timeout: 20_000 },
    );
    const rows = await page.$$eval('#servers tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(rows.map((r) => [r[0], r[1], r[2], r[3]])).toEqual([
      ['notes', 'stdio', '2025-11-25', 'ready'],
      ['clock', 'stdio', MODERN, 'ready'],
    ]);
    // Calls in flight now, not finished ones (`ledger stats` counts those): said by the header.
    expect(await page.$$eval('#servers thead th', (ths) => ths.map((th) => th.textContent))).toContain('In flight');
    await page.waitForFunction(() => document.querySelectorAll('#tools tbody tr').length === 10, undefined, { timeout: 15_000 });
    const tools = await page.$$eval('#tools tbody tr td:first-child', (tds) => tds.map((td) => td.textContent));
    expect(tools).toEqual(expect.arrayContaining(['notes__echo', 'clock__add']));
    expect(await page.$$eval('#servers tbody tr td:nth-child(5)', (tds) => tds.map((td) => td.textContent))).toEqual(['5', '5']);
    // Calls in flight: none once the hub's own first requests (its list fetches) are answered.
    await page.waitForFunction(() => [...document.querySelectorAll('#servers tbody tr td:nth-child(6)')].every((td) => td.textContent === '0'), undefined, { timeout: 10_000 });
    expect(errors).toEqual([]);
  });

  it('shows a call made while it is open in the live feed, and keeps a screenshot', async () => {
    const r = await call('clock__echo', { text: 'seen live' });
    expect(r.result.content[0].text).toBe('echo:seen live');
    await page.waitForFunction(
      () => [...document.querySelectorAll('#feed tbody tr')].some((tr) => tr.textContent?.includes('clock__echo') && tr.textContent.includes('ok')),
      undefined,
      { timeout: 10_000 },
    );
    const feed = await page.$$eval('#feed tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    const row = feed.find((cells) => cells[2] === 'clock__echo')!;
    expect(row[1]).toBe('tools/call');
    expect(row[3]).toBe('clock');
    expect(row[4]).toBe('ok');
    expect(row[6]).toBe(`page-test (${MODERN})`);
    expect(await page.isHidden('#feed-empty')).toBe(true);

    const dir = join(ROOT, '.tmp');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'status-page.png');
    await page.screenshot({ path: file, fullPage: true });
    expect(statSync(file).size).toBeGreaterThan(10_000);
  });
});

describe('status page against a long upstream name', () => {
  it('keeps the catalog\'s Flags column on screen when a tool name is 5,000 characters', async () => {
    const tools = [{ name: 'x'.repeat(5000), description: 'long', inputSchema: { type: 'object' } }, { name: 'short', description: 'short', inputSchema: { type: 'object' } }];
    const long = await startHub({ servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', TOOLS: JSON.stringify(tools) }) } });
    const p = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      await p.goto(`${new URL(long.url).origin}/admin/`);
      await p.waitForFunction(() => document.querySelectorAll('#tools tbody tr').length === 2, undefined, { timeout: 20_000 });
      const flags = await p.$$eval('#tools thead th', (ths) => ths.map((th) => [th.textContent, Math.round(th.getBoundingClientRect().left)] as const));
      const x = flags.find(([t]) => t === 'Flags')![1];
      expect(x).toBeLessThan(1280);
    } finally {
      await p.close();
      await long.stop();
    }
  }, 60_000);
});

describe('status page with authentication on', () => {
  const ADMIN_KEY = 'sy_ops-page-key-0123456789abcdefghijklmnopqrstuvwx';
  const USER_KEY = 'sy_user-page-key-0123456789abcdefghijklmnopqrstuvw';
  let authed: HubProcess;
  let p: Page;

  beforeAll(async () => {
    authed = await startHub({
      auth: {
        apiKeys: [
          { principal: 'ops', sha256: sha256Hex(ADMIN_KEY), scopes: ['switchyard:admin'] },
          { principal: 'user', sha256: sha256Hex(USER_KEY) },
        ],
      },
      servers: { clock: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs', [], { SERVER_NAME: 'clock-modern' }) },
    });
    p = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  }, 60_000);

  afterAll(async () => {
    await p?.close();
    await authed?.stop();
    expect(authed.logs.join('\n')).not.toContain(ADMIN_KEY);
  });

  it('asks for a credential, refuses one without the admin scope, then shows the hub and its live feed', async () => {
    const errors: string[] = [];
    p.on('pageerror', (e) => errors.push(String(e)));
    await p.goto(`${new URL(authed.url).origin}/admin/`);
    await p.waitForSelector('#login', { state: 'visible', timeout: 10_000 });
    expect(await p.textContent('#conn')).toBe('needs a credential');
    expect(await p.$$eval('#servers tbody tr', (trs) => trs.length)).toBe(0);

    await p.fill('#login-key', USER_KEY);
    await p.click('#login-form button');
    await p.waitForFunction(() => document.getElementById('login-error')?.textContent?.includes('switchyard:admin'), undefined, { timeout: 10_000 });

    await p.fill('#login-key', ADMIN_KEY);
    await p.click('#login-form button');
    await p.waitForFunction(() => document.getElementById('conn')?.textContent === 'live', undefined, { timeout: 15_000 });
    expect(await p.isHidden('#login')).toBe(true);
    expect(await p.isVisible('#sign-out')).toBe(true);
    await p.waitForFunction(() => [...document.querySelectorAll('#servers tbody tr')].some((r) => r.textContent?.includes('ready')), undefined, { timeout: 20_000 });
    await p.waitForFunction(() => document.querySelectorAll('#tools tbody tr').length === 5, undefined, { timeout: 15_000 });

    const r = await call('clock__echo', { text: 'behind a key' }, authed, USER_KEY);
    expect(r.result.content[0].text).toBe('echo:behind a key');
    await p.waitForFunction(() => [...document.querySelectorAll('#feed tbody tr')].some((tr) => tr.textContent?.includes('clock__echo')), undefined, { timeout: 10_000 });
    // The credential stays out of every URL the page opened (the feed went with a ticket).
    const stored = await p.evaluate(() => sessionStorage.getItem('switchyard.adminCredential'));
    expect(stored).toBe(ADMIN_KEY);
    expect(p.url()).not.toContain(ADMIN_KEY);

    // Forgetting it asks again after the reload.
    await p.click('#sign-out');
    await p.waitForSelector('#login', { state: 'visible', timeout: 10_000 });
    expect(await p.evaluate(() => sessionStorage.getItem('switchyard.adminCredential'))).toBeNull();
    expect(errors).toEqual([]);
  });
});
