/**
 * The status page at /admin/ in a real headless Chromium (Debian's chromium, driven by
 * playwright-core): it shows the upstreams with era and state and the catalog, and a call made
 * while it is open appears in its live feed (over /admin/events). A screenshot is kept in .tmp/.
 */
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';

const CHROMIUM = '/usr/bin/chromium';
const MODERN = '2026-07-28';

let hub: HubProcess;
let browser: Browser;
let page: Page;
let base: string;

async function call(name: string, args: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await fetch(hub.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': name },
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
    await page.waitForFunction(() => document.querySelectorAll('#tools tbody tr').length === 10, undefined, { timeout: 15_000 });
    const tools = await page.$$eval('#tools tbody tr td:first-child', (tds) => tds.map((td) => td.textContent));
    expect(tools).toEqual(expect.arrayContaining(['notes__echo', 'clock__add']));
    expect(await page.$$eval('#servers tbody tr td:nth-child(5)', (tds) => tds.map((td) => td.textContent))).toEqual(['5', '5']);
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
