/**
 * A tools/call held before it is sent while a reload adds a `policy.confirm` glob that matches
 * it: the call is not sent unasked, whether it was held before its confirmation check (a
 * plugin's beforeCall, its principal's own process of a `processPerPrincipal` server still
 * starting) or after it (waiting for an earlier call with its idempotency key, which ends with
 * the key freed: its legacy client failed the upstream's question). A client that declared
 * form elicitation is asked (SDK v1 on its session, SDK v2 by input_required and its retry), and
 * the call runs once on a yes and not at all on a no; a client that cannot be asked is refused
 * with a tool error saying why, its row denied. Real built hub, the repo's mutable server, SDK
 * v1 and v2 clients.
 */
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { heldCallRig, heldNow } from '../helpers/hold-plugin.js';
import { ROOT, nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

const TOOLS = JSON.stringify([{ name: 'echo', inputSchema: { type: 'object' } }]);

let hub: HubProcess | undefined;
afterEach(async () => {
  await hub?.stop();
  hub = undefined;
});

async function rigged(): Promise<{ hub: HubProcess; dir: string; calls: () => number }> {
  const dir = tmp();
  const { plugins, r, calls } = heldCallRig(dir);
  hub = await startHub({ plugins, servers: { r } }, { dir });
  const h = hub;
  await waitForReady(h.url, ['r']);
  return { hub: h, dir, calls };
}

function rows(h: HubProcess): Json[] {
  const db = new Database(join(h.dir, 'ledger.db'), { readonly: true });
  try {
    return db.prepare('SELECT outcome, error_message AS message FROM audit WHERE method = ? ORDER BY id').all('tools/call') as Json[];
  } finally {
    db.close();
  }
}

/** Holds a call to r__echo in the plugin, reloads with `policy.confirm: ['r__echo']`, lets it go. */
async function heldAcrossReload(r: { hub: HubProcess; dir: string }, call: () => Promise<unknown>): Promise<unknown> {
  const answer = call().then(
    (v) => v,
    (err: Error) => ({ error: err.message }),
  );
  await heldNow(r.dir);
  setSection(r.hub, 'policy', { confirm: ['r__echo'] });
  await loggedTimes(r.hub, 'config reload: policy replaced', 1);
  writeFileSync(join(r.dir, 'open'), '');
  return answer;
}

const textOf = (res: unknown): string => String(((res as { content?: { text?: string }[] }).content ?? [])[0]?.text ?? JSON.stringify(res));

/** The bearer header of `key`, for a client's transport (none without a key). */
const bearer = (key?: string) => (key === undefined ? undefined : { requestInit: { headers: { authorization: `Bearer ${key}` } } });

/** An SDK v1 client that declared form elicitation, connected, whose user answers `action`; `asked`: each question's message. */
async function legacyAsked(name: string, h: HubProcess, action: 'accept' | 'decline', key?: string): Promise<{ c: ClientV1; asked: string[] }> {
  const asked: string[] = [];
  const c = new ClientV1({ name, version: '1' }, { capabilities: { elicitation: {} } });
  c.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(String(req.params.message));
    return { action };
  });
  await c.connect(new TransportV1(new URL(h.url), bearer(key)));
  return { c, asked };
}

/** An SDK v2 client that declared form elicitation, connected; its user accepts (with `content`, given the questions so far); `asked`: each question's message. */
async function modernAsked(name: string, h: HubProcess, key?: string, content: (asked: string[]) => Record<string, string> = () => ({})): Promise<{ c: ClientV2; asked: string[] }> {
  const asked: string[] = [];
  const c = new ClientV2({ name, version: '1' }, { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } } });
  c.setRequestHandler('elicitation/create', async (req) => {
    asked.push(String(req.params.message));
    return { action: 'accept', content: content(asked) };
  });
  await c.connect(new TransportV2(new URL(h.url), bearer(key)));
  return { c, asked };
}

describe('a held tools/call that a policy.confirm reload now covers', () => {
  for (const action of ['accept', 'decline'] as const) {
    it(`asks a legacy (SDK v1) client's user first, and runs only on a yes (${action})`, async () => {
      const r = await rigged();
      const { c, asked } = await legacyAsked('legacy-held', r.hub, action);
      try {
        const before = r.calls();
        const res = await heldAcrossReload(r, () => c.callTool({ name: 'r__echo', arguments: { text: 'held' } }));
        expect(asked).toHaveLength(1);
        expect(asked[0]).toContain('Allow the tool "r__echo"');
        if (action === 'accept') {
          expect((res as { isError?: boolean }).isError).not.toBe(true);
          expect(r.calls()).toBe(before + 1);
        } else {
          expect(textOf(res)).toBe('Tool r__echo was declined by the user.');
          expect(r.calls()).toBe(before);
          await expect.poll(() => rows(r.hub), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'denied', message: 'Tool r__echo was declined by the user.' }]);
        }
      } finally {
        await c.close().catch(() => undefined);
      }
    });
  }

  it("asks a modern (SDK v2) client's user by input_required, and runs the call once on the retry's yes", async () => {
    const r = await rigged();
    const { c, asked } = await modernAsked('modern-held', r.hub);
    try {
      const before = r.calls();
      // The retry's beforeCall holds it again: opened at once (the file stays).
      const res = await heldAcrossReload(r, () => c.callTool({ name: 'r__echo', arguments: { text: 'held' } }));
      expect((res as { isError?: boolean }).isError, JSON.stringify(res)).not.toBe(true);
      expect(asked).toHaveLength(1);
      expect(r.calls()).toBe(before + 1);
    } finally {
      await c.close().catch(() => undefined);
    }
  });

  it('refuses a client that cannot be asked, saying why, and sends nothing', async () => {
    const r = await rigged();
    const c = new ClientV1({ name: 'legacy-unasked', version: '1' }, { capabilities: {} });
    await c.connect(new TransportV1(new URL(r.hub.url)));
    try {
      const before = r.calls();
      const res = await heldAcrossReload(r, () => c.callTool({ name: 'r__echo', arguments: { text: 'held' } }));
      expect(textOf(res)).toMatch(/needs the user's confirmation, and this client cannot ask the user/);
      expect(r.calls()).toBe(before);
      await expect.poll(() => rows(r.hub).map((x) => x.outcome), { timeout: 10_000, interval: 50 }).toEqual(['denied']);
    } finally {
      await c.close().catch(() => undefined);
    }
  });
});

const ALICE = 'sy_alice-confirmreload-key-0123456789abcdefghijk';

/**
 * A processPerPrincipal server whose processes start only while the file `hold` is absent: the
 * hub's own first process starts; alice's first call then waits for hers, past its
 * confirmation check, for as long as the test keeps the file.
 */
async function riggedOwnProcess(): Promise<{ hub: HubProcess; dir: string; hold: string; calls: () => number }> {
  const dir = tmp();
  const hold = join(dir, 'hold');
  const statsFile = join(dir, 'stats-{pid}.json');
  const r = {
    command: process.execPath,
    args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), join(ROOT, 'test/fixtures/catalog/mutable-server.mjs')],
    env: { ERA: 'modern', TOOLS, STATS_FILE: statsFile, START_HOLD_FILE: hold, START_HELD_SAID: join(dir, 'held') },
    processPerPrincipal: true,
  };
  hub = await startHub({ auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE) }] }, servers: { r } }, { dir });
  const h = hub;
  await waitForReadyWith(h.url, ['r'], ALICE);
  const calls = () =>
    readdirSync(dir)
      .filter((f) => f.startsWith('stats-'))
      .reduce((n, f) => n + ((JSON.parse(readFileSync(join(dir, f), 'utf8')) as Record<string, number>)['tools/call'] ?? 0), 0);
  return { hub: h, dir, hold, calls };
}

/**
 * `call`, made while alice's own process is held from starting: past its confirmation check
 * (none then), it waits for that process; then the reload adds `policy.confirm`, and the process starts.
 */
async function waitingAcrossReload<T>(r: { hub: HubProcess; dir: string; hold: string }, call: () => Promise<T>): Promise<T> {
  writeFileSync(r.hold, '');
  const answer = call();
  await expect.poll(() => existsSync(join(r.dir, 'held')), { timeout: 10_000, interval: 20 }).toBe(true);
  setSection(r.hub, 'policy', { confirm: ['r__echo'] });
  await loggedTimes(r.hub, 'config reload: policy replaced', 1);
  rmSync(r.hold);
  return answer;
}

describe('a tools/call waiting for its principal\'s own process across a policy.confirm reload', () => {
  it("(its own process starting) asks a legacy (SDK v1) client's user before it is sent, and a no sends nothing", async () => {
    const r = await riggedOwnProcess();
    const { c, asked } = await legacyAsked('legacy-own', r.hub, 'decline', ALICE);
    try {
      const answer = await waitingAcrossReload(r, () => c.callTool({ name: 'r__echo', arguments: { text: 'x' } }));
      expect(textOf(answer)).toBe('Tool r__echo was declined by the user.');
      expect(asked).toHaveLength(1);
      expect(r.calls()).toBe(0);
      await expect.poll(() => rows(r.hub), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'denied', message: 'Tool r__echo was declined by the user.' }]);
    } finally {
      await c.close().catch(() => undefined);
    }
  });

  it('(its own process starting) answers a modern (SDK v2) client input_required, and runs the call once on the yes', async () => {
    const r = await riggedOwnProcess();
    const { c, asked } = await modernAsked('modern-own', r.hub, ALICE);
    try {
      const res = await waitingAcrossReload(r, () => c.callTool({ name: 'r__echo', arguments: { text: 'x' } }));
      expect((res as { isError?: boolean }).isError, JSON.stringify(res)).not.toBe(true);
      expect(asked).toHaveLength(1);
      expect(r.calls()).toBe(1);
      await expect.poll(() => rows(r.hub).map((x) => x.outcome), { timeout: 10_000, interval: 50 }).toEqual(['input_required', 'ok']);
    } finally {
      await c.close().catch(() => undefined);
    }
  });
});

describe('a tools/call held after its confirmation check that a policy.confirm reload now covers', () => {
  const call = { name: 't__elicit_form', arguments: { who: 'held' }, _meta: { 'dev.switchyard/idempotency-key': 'held-key-1' } };

  /**
   * The hub, and a first call with the key whose legacy client is asked the upstream's question
   * and fails it when let go: the upstream only answered input_required, so the key is freed,
   * and a duplicate waiting for it claims it.
   */
  async function firstHolding(): Promise<{ h: HubProcess; first: ClientV1; a: Promise<unknown>; letGo: () => void }> {
    hub = await startHub({ servers: { t: nodeServer('test/fixtures/translation/modern-server.mjs') } });
    const h = hub;
    await waitForReady(h.url, ['t']);
    let letGo!: () => void;
    const released = new Promise<void>((r) => (letGo = r));
    let firstAsked = false;
    const first = new ClientV1({ name: 'legacy-first', version: '1' }, { capabilities: { elicitation: {} } });
    first.setRequestHandler(ElicitRequestSchema, async () => {
      firstAsked = true;
      await released;
      throw new Error('the user closed the window');
    });
    await first.connect(new TransportV1(new URL(h.url)));
    const a = first.callTool(call).then((v) => v, (err: Error) => ({ error: err.message }));
    await expect.poll(() => firstAsked, { timeout: 10_000, interval: 20 }).toBe(true);
    return { h, first, a, letGo };
  }

  /** Both rows begun (the duplicate's just before it joins the key: no confirmation policy yet), then the reload. */
  async function reloadWhileWaiting(h: HubProcess): Promise<void> {
    await expect.poll(() => rows(h).map((x) => x.outcome), { timeout: 10_000, interval: 20 }).toEqual(['in_flight', 'in_flight']);
    setSection(h, 'policy', { confirm: ['t__elicit_form'] });
    await loggedTimes(h, 'config reload: policy replaced', 1);
  }

  it('(waiting for an earlier call with its idempotency key, freed) asks its legacy client before it is sent', async () => {
    const { h, first, a, letGo } = await firstHolding();
    const { c: second, asked } = await legacyAsked('legacy-second', h, 'decline');
    try {
      const b = second.callTool(call).then((v) => v, (err: Error) => ({ error: err.message }));
      await reloadWhileWaiting(h);
      letGo();
      await a;
      expect(textOf(await b)).toBe('Tool t__elicit_form was declined by the user.');
      expect(asked).toHaveLength(1);
      expect(asked[0]).toContain('Allow the tool "t__elicit_form"');
      // The upstream ran the first call's round only.
      await expect.poll(() => h.logs.filter((l) => l.includes('elicit_form ran for held')).length, { timeout: 10_000, interval: 50 }).toBe(1);
      await expect.poll(() => rows(h)[1], { timeout: 10_000, interval: 50 }).toEqual({ outcome: 'denied', message: 'Tool t__elicit_form was declined by the user.' });
    } finally {
      await first.close().catch(() => undefined);
      await second.close().catch(() => undefined);
    }
  });

  it('(waiting for an earlier call with its idempotency key, freed) answers its modern client input_required, and the retry\'s yes runs it', async () => {
    const { h, first, a, letGo } = await firstHolding();
    // The hub's confirmation (nothing to fill), then the upstream's question (a name).
    const { c: second, asked } = await modernAsked('modern-second', h, undefined, (q): Record<string, string> => (q.length === 1 ? {} : { name: 'Ann' }));
    try {
      const b = second.callTool(call).then((v) => v, (err: Error) => ({ error: err.message }));
      await reloadWhileWaiting(h);
      letGo();
      await a;
      const res = await b;
      expect((res as { isError?: boolean }).isError, JSON.stringify(res)).not.toBe(true);
      // The hub's confirmation first, then the upstream's own question.
      expect(asked[0]).toContain('Allow the tool "t__elicit_form"');
      expect(asked[1]).toContain('what is your name?');
      expect(textOf(res)).toContain('accept');
      // The waiting request's row: it waited for the user; the retries': the upstream's question, then its end.
      await expect.poll(() => rows(h).map((x) => x.outcome).slice(1), { timeout: 10_000, interval: 50 }).toEqual(['input_required', 'input_required', 'ok']);
      // Each run's line comes on the server's stderr, in its own time.
      await expect.poll(() => h.logs.filter((l) => l.includes('elicit_form ran for held')).length, { timeout: 10_000, interval: 50 }).toBe(3);
    } finally {
      await first.close().catch(() => undefined);
      await second.close().catch(() => undefined);
    }
  });

  it('(waiting for an earlier call with its idempotency key, freed) refuses a client that cannot be asked, and sends nothing', async () => {
    const { h, first, a, letGo } = await firstHolding();
    const second = new ClientV1({ name: 'legacy-unasked-second', version: '1' }, { capabilities: {} });
    await second.connect(new TransportV1(new URL(h.url)));
    try {
      const b = second.callTool(call).then((v) => v, (err: Error) => ({ error: err.message }));
      await reloadWhileWaiting(h);
      letGo();
      await a;
      expect(textOf(await b)).toBe("Tool t__elicit_form needs the user's confirmation, and this client cannot ask the user (it did not declare form elicitation). It was not run.");
      await expect.poll(() => h.logs.filter((l) => l.includes('elicit_form ran for held')).length, { timeout: 10_000, interval: 50 }).toBe(1);
      await expect.poll(() => rows(h)[1]?.outcome, { timeout: 10_000, interval: 50 }).toBe('denied');
    } finally {
      await first.close().catch(() => undefined);
      await second.close().catch(() => undefined);
    }
  });
});
