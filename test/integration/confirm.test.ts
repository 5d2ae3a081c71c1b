import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { startHub, nodeServer, type HubProcess } from '../helpers/hub-process.js';
import Database from 'better-sqlite3';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady } from '../helpers/wire.js';

type Action = 'accept' | 'decline' | 'cancel';

/** Confirmation of risky calls (policy.confirm): the hub asks the user before forwarding. */
describe('confirmation of risky calls', () => {
  let hub: HubProcess;
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-confirm-'));
  const counter = join(dir, 'counter.json');
  const count = (label: string): number => (existsSync(counter) ? (JSON.parse(readFileSync(counter, 'utf8'))[label] ?? 0) : 0);

  beforeAll(async () => {
    hub = await startHub(
      {
        policy: { confirm: ['*__counter_bump'] },
        servers: {
          legacy: nodeServer('test/fixtures/servers/sdk1-server.mjs', [], { COUNTER_FILE: counter }),
          modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs', [], { COUNTER_FILE: counter }),
        },
      },
      { dir },
    );
    await waitForReady(hub.url, ['legacy', 'modern']);
  });
  afterAll(async () => {
    await hub?.stop();
  });

  async function legacyClient(action: Action | null, asked: string[]): Promise<V1Client> {
    const c = new V1Client({ name: 'legacy-confirm', version: '1' }, { capabilities: action ? { elicitation: {} } : {} });
    if (action)
      c.setRequestHandler(ElicitRequestSchema, async (req) => {
        asked.push(String(req.params.message));
        return action === 'accept' ? { action, content: {} } : { action };
      });
    await c.connect(new V1Transport(new URL(hub.url)));
    return c;
  }

  async function modernClient(action: Action | null, asked: string[]): Promise<V2Client> {
    const c = new V2Client(
      { name: 'modern-confirm', version: '1' },
      { versionNegotiation: { mode: 'auto' }, capabilities: action ? { elicitation: { form: {} } } : {} },
    );
    if (action)
      c.setRequestHandler('elicitation/create', async (req) => {
        asked.push(String((req.params as { message?: string }).message));
        return action === 'accept' ? { action, content: {} } : { action };
      });
    await c.connect(new V2Transport(new URL(hub.url)));
    return c;
  }

  const text = (r: unknown) => ((r as { content: { text: string }[] }).content[0]?.text ?? '');

  for (const era of ['legacy', 'modern'] as const) {
    for (const server of ['legacy', 'modern'] as const) {
      const connect = era === 'legacy' ? legacyClient : modernClient;
      const tool = `${server}__counter_bump`;

      it(`${era} client, ${server} upstream: accept forwards the call, after asking with the tool's name and arguments`, async () => {
        const asked: string[] = [];
        const label = `${era}-${server}-accept`;
        const c = await connect('accept', asked);
        const r = await c.callTool({ name: tool, arguments: { label } });
        expect(r.isError).toBeFalsy();
        expect(text(r)).toContain('1');
        expect(count(label)).toBe(1);
        expect(asked).toHaveLength(1);
        expect(asked[0]).toContain(tool);
        expect(asked[0]).toContain(label);
        await c.close();
      });

      for (const action of ['decline', 'cancel'] as const) {
        it(`${era} client, ${server} upstream: ${action} → isError "declined by the user", upstream not called`, async () => {
          const asked: string[] = [];
          const label = `${era}-${server}-${action}`;
          const c = await connect(action, asked);
          const r = await c.callTool({ name: tool, arguments: { label } });
          expect(r.isError).toBe(true);
          expect(text(r)).toMatch(/declined by the user/);
          expect(count(label)).toBe(0);
          expect(asked).toHaveLength(1);
          await c.close();
        });
      }

      it(`${era} client without elicitation, ${server} upstream: isError explaining, never forwarded`, async () => {
        const label = `${era}-${server}-noelicit`;
        const c = await connect(null, []);
        const r = await c.callTool({ name: tool, arguments: { label } });
        expect(r.isError).toBe(true);
        expect(text(r)).toMatch(/needs the user's confirmation/);
        expect(count(label)).toBe(0);
        await c.close();
      });
    }
  }

  it('a client that declared URL elicitation only is never asked a form: isError explaining, never forwarded', async () => {
    const urlOnly = { elicitation: { url: {} } };
    const clients = [
      new V1Client({ name: 'legacy-url-only', version: '1' }, { capabilities: urlOnly }),
      new V2Client({ name: 'modern-url-only', version: '1' }, { versionNegotiation: { mode: 'auto' }, capabilities: urlOnly }),
    ];
    await clients[0]!.connect(new V1Transport(new URL(hub.url)));
    await clients[1]!.connect(new V2Transport(new URL(hub.url)));
    for (const [i, c] of clients.entries()) {
      const label = `url-only-${i}`;
      const r = await c.callTool({ name: 'modern__counter_bump', arguments: { label } });
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/did not declare form elicitation/);
      expect(count(label)).toBe(0);
      await c.close();
    }
  });

  it('tools outside policy.confirm run without asking', async () => {
    const asked: string[] = [];
    const c = await legacyClient('decline', asked);
    const r = await c.callTool({ name: 'modern__echo', arguments: { text: 'hi' } });
    expect(text(r)).toBe('echo:hi');
    expect(asked).toHaveLength(0);
    await c.close();
  });

  it('a legacy client that cancels its call while asked to confirm: audited cancelled (not denied), never forwarded', async () => {
    const label = 'cancel-while-asked';
    const name = 'legacy-confirm-abort';
    const c = new V1Client({ name, version: '1' }, { capabilities: { elicitation: {} } });
    let asked!: () => void;
    const wasAsked = new Promise<void>((r) => (asked = r));
    c.setRequestHandler(ElicitRequestSchema, async (_req, extra) => {
      asked();
      await new Promise((r) => (extra.signal.addEventListener('abort', r), setTimeout(r, 5_000)));
      return { action: 'decline' };
    });
    await c.connect(new V1Transport(new URL(hub.url)));
    const ac = new AbortController();
    const call = c.callTool({ name: 'modern__counter_bump', arguments: { label } }, undefined, { signal: ac.signal }).catch((e: unknown) => e);
    await wasAsked;
    ac.abort('the user stopped it');
    expect(await call).toBeInstanceOf(Error);
    const rows = async () =>
      ((await (await fetch(hub.url.replace('/mcp', `/admin/ledger?client=${name}&method=tools/call`))).json()) as { rows: { outcome: string }[] }).rows.map((r) => r.outcome);
    await expect.poll(rows, { timeout: 5_000 }).toEqual(['cancelled']);
    expect(count(label)).toBe(0);
    await c.close();
  });

  it('a declined call is audited as denied', async () => {
    const { execFileSync } = await import('node:child_process');
    const out = execFileSync(process.execPath, ['dist/src/cli/main.js', 'ledger', 'query', '--db', join(dir, 'ledger.db'), '--outcome', 'denied', '--json', '--limit', '100'], { encoding: 'utf8' });
    const rows = out.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
    expect(rows.length).toBeGreaterThanOrEqual(12);
    expect(rows.every((r) => r.tool?.endsWith('__counter_bump'))).toBe(true);
  });
});

// The answer came as a second request, charged to the tool's bucket again: with a per-tool burst
// of 1 the modern client's accept was refused 429 and the tool never ran (a legacy client paid one).
describe('confirmation under a per-tool rate limit', () => {
  let hub: HubProcess;
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-confirm-limit-'));
  const counter = join(dir, 'counter.json');
  const count = (label: string): number => (existsSync(counter) ? (JSON.parse(readFileSync(counter, 'utf8'))[label] ?? 0) : 0);

  beforeAll(async () => {
    hub = await startHub(
      {
        policy: { confirm: ['*__counter_bump', '*__echo'], rateLimit: { perTool: { burst: 1, perSecond: 0.001 }, perPrincipal: { burst: 40, perSecond: 0.001 } } },
        servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs', [], { COUNTER_FILE: counter }) },
      },
      { dir },
    );
    await waitForReady(hub.url, ['modern']);
  });
  afterAll(async () => {
    await hub?.stop();
  });

  it("a modern client's confirmed retry takes no second token of the tool's bucket; the next call does", async () => {
    const c = new V2Client({ name: 'modern-confirm-limit', version: '1' }, { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } } });
    c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: {} }));
    await c.connect(new V2Transport(new URL(hub.url)));
    const r = await c.callTool({ name: 'modern__counter_bump', arguments: { label: 'limited' } });
    expect(r.isError).toBeFalsy();
    expect(count('limited')).toBe(1);
    // The bucket holds: the next call of the tool is over it.
    await expect(c.callTool({ name: 'modern__counter_bump', arguments: { label: 'limited' } })).rejects.toThrow(/429|Too Many Requests/);
    expect(count('limited')).toBe(1);
    await c.close();
  });

  it("a retry refused at the edge (the principal's rate limit) is in its call's trace, as a forwarded one is", async () => {
    const ask = (id: string, extra: Record<string, unknown> = {}) =>
      post(hub.url, modernBody(id, 'tools/call', { name: 'modern__echo', arguments: { text: 'x' }, ...extra }, modernMeta({ [META_CAPS]: { elicitation: { form: {} } } })), modernHeaders('tools/call', 'modern__echo'));
    const first = await ask('edge-1');
    const result = first.body?.result as { resultType?: string; requestState?: string; inputRequests?: Record<string, unknown> } | undefined;
    expect(result?.resultType, first.text).toBe('input_required');
    // The principal's bucket (40) emptied: the next request of any kind is refused.
    for (let i = 0; i < 41 && (await post(hub.url, modernBody(`drain-${i}`, 'tools/list', {}, modernMeta()), modernHeaders('tools/list'))).status !== 429; i++);
    const inputResponses = Object.fromEntries(Object.keys(result!.inputRequests!).map((k) => [k, { action: 'accept', content: {} }]));
    const retry = await ask('edge-2', { requestState: result!.requestState, inputResponses });
    expect(retry.status).toBe(429);
    const rowOf = (id: string) => {
      const db = new Database(join(dir, 'ledger.db'), { readonly: true });
      try {
        return db.prepare('SELECT outcome, trace_id, span_id, parent_span_id FROM audit WHERE request_id = ?').get(id) as Record<string, string | null> | undefined;
      } finally {
        db.close();
      }
    };
    await expect.poll(() => rowOf('edge-2')?.outcome).toBe('denied');
    const [a, b] = [rowOf('edge-1')!, rowOf('edge-2')!];
    expect(b).toMatchObject({ trace_id: a.trace_id, parent_span_id: a.span_id });
    expect(b.span_id).not.toBe(a.span_id);
  });
});
