#!/usr/bin/env node
// Example upstream in the modern era only (2026-07-28), built on SDK v2: clocks and dates.
//   stdio (default): node examples/modern-clock.mjs
//   HTTP:            node examples/modern-clock.mjs --http 3102   -> http://127.0.0.1:3102/mcp
// A legacy `initialize` is refused with -32022 naming the supported versions. List and
// read results carry ttlMs/cacheScope so a caching client (the hub) can honour them.
import { McpServer, ResourceNotFoundError, ResourceTemplate, completable, createMcpHandler } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';
import { httpPortFromArgv, serveFetch } from './lib/http-bridge.mjs';

const log = (msg) => process.stderr.write(`[modern-clock] ${msg}\n`);

// Short, slash-free zone ids so they fit the clock://zone/{name} template.
const ZONES = {
  utc: { timeZone: 'UTC', city: 'UTC' },
  london: { timeZone: 'Europe/London', city: 'London' },
  paris: { timeZone: 'Europe/Paris', city: 'Paris' },
  'new-york': { timeZone: 'America/New_York', city: 'New York' },
  tokyo: { timeZone: 'Asia/Tokyo', city: 'Tokyo' },
  sydney: { timeZone: 'Australia/Sydney', city: 'Sydney' },
};
const CITIES = Object.values(ZONES).map((z) => z.city);

function resolveZone(input) {
  if (input === undefined) return 'UTC';
  const byId = ZONES[input.toLowerCase()];
  if (byId) return byId.timeZone;
  new Intl.DateTimeFormat('en-US', { timeZone: input }); // throws RangeError on an unknown zone
  return input;
}

function formatNow(timeZone, date = new Date()) {
  return new Intl.DateTimeFormat('en-CA', {
    timeZone,
    dateStyle: 'short',
    timeStyle: 'long',
    hourCycle: 'h23',
  }).format(date);
}

function addDays(isoDate, days) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(isoDate);
  if (!m) throw new Error(`date must be YYYY-MM-DD, got "${isoDate}"`);
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  if (d.toISOString().slice(0, 10) !== isoDate) throw new Error(`not a calendar date: "${isoDate}"`);
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}

const LIST_HINT = { ttlMs: 300_000, cacheScope: 'public' };

function createServer() {
  const server = new McpServer(
    { name: 'modern-clock', version: '1.0.0' },
    {
      capabilities: { tools: {}, prompts: {}, resources: {}, completions: {} },
      instructions: 'Current time in a few time zones, and date arithmetic.',
      cacheHints: {
        'tools/list': LIST_HINT,
        'prompts/list': LIST_HINT,
        'resources/list': LIST_HINT,
        'resources/templates/list': LIST_HINT,
      },
    },
  );

  server.registerTool(
    'now',
    {
      title: 'Current time',
      description: 'The current date and time in a time zone (IANA name or one of the zone ids; default UTC)',
      inputSchema: z.object({ timezone: z.string().optional() }),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ timezone }) => {
      let zone;
      try {
        zone = resolveZone(timezone);
      } catch {
        return { isError: true, content: [{ type: 'text', text: `Unknown time zone "${timezone}"` }] };
      }
      return { content: [{ type: 'text', text: `${formatNow(zone)} (${zone})` }] };
    },
  );

  server.registerTool(
    'add_days',
    {
      title: 'Add days',
      description: 'Add (or subtract) whole days to a YYYY-MM-DD date',
      inputSchema: z.object({ date: z.string(), days: z.number().int() }),
      outputSchema: z.object({ date: z.string() }),
      annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    },
    async ({ date, days }) => {
      try {
        const result = addDays(date, days);
        return { content: [{ type: 'text', text: result }], structuredContent: { date: result } };
      } catch (error) {
        return { isError: true, content: [{ type: 'text', text: error.message }] };
      }
    },
  );

  server.registerPrompt(
    'plan_day',
    {
      title: 'Plan a day',
      description: 'Plan a day in a city, aware of its local time',
      argsSchema: z.object({
        city: completable(z.string(), (value) => CITIES.filter((c) => c.toLowerCase().startsWith(String(value ?? '').toLowerCase()))),
      }),
    },
    ({ city }) => {
      const zone = Object.values(ZONES).find((z) => z.city.toLowerCase() === city.toLowerCase());
      const when = zone ? ` It is now ${formatNow(zone.timeZone)} there.` : '';
      return { messages: [{ role: 'user', content: { type: 'text', text: `Plan a pleasant day in ${city}.${when}` } }] };
    },
  );

  server.registerResource(
    'zones',
    'clock://zones',
    { title: 'Zones', description: 'The zone ids this server knows', mimeType: 'application/json', cacheHint: { ttlMs: 3_600_000, cacheScope: 'public' } },
    async (uri) => ({
      contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(Object.fromEntries(Object.entries(ZONES).map(([id, z]) => [id, z.timeZone]))) }],
    }),
  );

  server.registerResource(
    'zone',
    new ResourceTemplate('clock://zone/{name}', {
      list: undefined,
      complete: { name: (value) => Object.keys(ZONES).filter((id) => id.startsWith(String(value ?? '').toLowerCase())) },
    }),
    // The content holds the current time, so it is stale at once.
    { title: 'Zone', description: 'Current time in one zone', mimeType: 'application/json', cacheHint: { ttlMs: 0, cacheScope: 'public' } },
    async (uri, { name }) => {
      const zone = ZONES[String(name).toLowerCase()];
      if (!zone) throw new ResourceNotFoundError(uri.href);
      return {
        contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id: name, ...zone, now: formatNow(zone.timeZone) }) }],
      };
    },
  );

  return server;
}

const port = httpPortFromArgv();
if (port === undefined) {
  serveStdio(() => createServer(), { legacy: 'reject', onerror: (e) => log(`stdio: ${e.message}`) });
  log('serving modern-only on stdio');
} else {
  const handler = createMcpHandler(() => createServer(), { legacy: 'reject', onerror: (e) => log(`http: ${e.message}`) });
  const { port: bound } = await serveFetch((req) => handler.fetch(req), { port, onError: (e) => log(`bridge: ${e.message}`) });
  process.stdout.write(`LISTENING ${bound}\n`);
  log(`serving modern-only on http://127.0.0.1:${bound}/mcp`);
}
