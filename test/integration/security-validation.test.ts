/**
 * Attack table, validation rows, against the real built hub and the spy upstream: arguments
 * that break a tool's inputSchema never reach the upstream (an isError EINVAL result, audited
 * as tool_error); hostile schemas (deep nesting, a huge enum, catastrophic patterns), an
 * unsupported dialect and a network $ref get the tool quarantined without stalling the hub;
 * structuredContent that breaks the outputSchema becomes an isError result.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernBody, modernHeaders, post, waitForReady, type Json } from '../helpers/wire.js';

const ERROR_META = 'dev.switchyard/error';

interface Seen {
  method: string | null;
  tool: string | null;
}

describe('argument and result validation at the hub', () => {
  let spy: HttpFixture;
  let hub: HubProcess;
  let n = 0;

  beforeAll(async () => {
    spy = await startHttpFixture('test/fixtures/servers/spy-http-server.mjs');
    hub = await startHub({ servers: { spy: { url: spy.url } } });
    await waitForReady(hub.url, ['spy']);
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
    await spy?.stop();
  });

  async function callTool(name: string, args: unknown, id = `v${++n}`): Promise<{ result: Json; ms: number }> {
    const t0 = Date.now();
    const r = await post(hub.url, modernBody(id, 'tools/call', { name, arguments: args }), modernHeaders('tools/call', name));
    expect(r.status, r.text).toBe(200);
    expect(r.body?.result, r.text).toBeDefined();
    return { result: r.body!.result!, ms: Date.now() - t0 };
  }

  async function upstreamCalls(tool: string): Promise<number> {
    const res = await fetch(new URL('/seen', spy.url));
    const { seen } = (await res.json()) as { seen: Seen[] };
    return seen.filter((s) => s.method === 'tools/call' && s.tool === tool).length;
  }

  function hubError(result: Json): { code: string; message: string; retryable: boolean; pointer?: string } {
    expect(result.isError).toBe(true);
    const e = (result._meta as Json)[ERROR_META] as never as { code: string; message: string; retryable: boolean };
    expect((result.content as { text: string }[])[0].text).toBe(e.message);
    return e;
  }

  function outcomeOf(requestId: string): string | undefined {
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true, fileMustExist: true });
    try {
      return (db.prepare('SELECT outcome FROM audit WHERE request_id = ?').get(requestId) as { outcome: string } | undefined)?.outcome;
    } finally {
      db.close();
    }
  }

  it('arguments failing validation → EINVAL with a JSON pointer, retryable, audited tool_error; the upstream is not called', async () => {
    const cases: [unknown, string, RegExp][] = [
      [{ n: 'seven' }, '/n', /must be integer/],
      [{}, '/n', /is required/],
      [{ n: 1, extra: true }, '/extra', /not an allowed property/],
      [{ n: -1 }, '/n', /must be >= 0/],
    ];
    for (const [args, pointer, reason] of cases) {
      const id = `einval-${++n}`;
      const { result } = await callTool('spy__strict_args', args, id);
      const e = hubError(result);
      expect(e).toMatchObject({ code: 'EINVAL', retryable: true, pointer });
      expect(e.message).toContain(`arguments${pointer}`);
      expect(e.message).toMatch(reason);
      // No outputSchema: the error is also the structuredContent.
      expect(result.structuredContent).toEqual({ error: e });
      await expect.poll(() => outcomeOf(id)).toBe('tool_error');
    }
    // Arguments that are no object break the request's own schema: -32602, not a tool error.
    const array = await post(hub.url, modernBody('einval-array', 'tools/call', { name: 'spy__strict_args', arguments: [1, 2] }), modernHeaders('tools/call', 'spy__strict_args'));
    expect(array.body?.error).toMatchObject({ code: -32602, message: expect.stringContaining('arguments must be an object') });
    await expect.poll(() => outcomeOf('einval-array')).toBe('rpc_error');
    expect(await upstreamCalls('strict_args')).toBe(0);
    const ok = await callTool('spy__strict_args', { n: 7 });
    expect(ok.result.isError).toBeUndefined();
    expect(await upstreamCalls('strict_args')).toBe(1);
  });

  it('hostile schemas quarantine their tool at once, and the upstream is not called', async () => {
    const hostile: [string, unknown, RegExp][] = [
      ['spy__hostile_deep', {}, /nested deeper than/],
      ['spy__hostile_enum', { e: 'value-1' }, /larger than|enum with more than/],
      ['spy__hostile_regex', { s: `${'a'.repeat(40)}b` }, /nested repetition/],
      ['spy__hidden_regex', { s: `x${'a'.repeat(40)}b` }, /nested repetition/],
      ['spy__draft04', {}, /unsupported JSON Schema dialect/],
      ['spy__net_ref', { a: 1 }, /does not fetch/],
    ];
    // What the hub takes to answer a call it refuses by its schema, the upstream not called either:
    // the same path but for the hostile schema, timed just before and just after each hostile call.
    const plain = async () => {
      const { result, ms } = await callTool('spy__strict_args', { n: -1 });
      expect(hubError(result).code).toBe('EINVAL');
      return ms;
    };
    for (const [tool, args, why] of hostile) {
      const before = await plain();
      const { result, ms } = await callTool(tool, args);
      const after = await plain();
      const e = hubError(result);
      expect(e).toMatchObject({ code: 'ESCHEMA', retryable: false });
      expect(e.message).toMatch(/quarantined/);
      expect(e.message).toMatch(why);
      // Without stalling the hub (a catastrophic pattern's backtracking runs for hours), bounded
      // by what a plain refusal takes now: a fixed 2 s could run out on a starved machine.
      expect(ms, `${tool}: ${ms} ms; a plain refusal ${before} and ${after} ms`).toBeLessThan(Math.max(5_000, 20 * Math.max(before, after)));
      expect(await upstreamCalls(tool.slice('spy__'.length))).toBe(0);
    }
    // A network $ref is never fetched.
    const { schemaFetches } = (await (await fetch(new URL('/seen', spy.url))).json()) as { schemaFetches: number };
    expect(schemaFetches).toBe(0);
    // Each is flagged in the hub's log (read from its stderr pipe, so a line may trail the answer).
    const tools = ['hostile_deep', 'hostile_enum', 'hostile_regex', 'hidden_regex', 'draft04', 'net_ref'];
    const quarantined = () => hub.logs.filter((l) => l.includes('tool quarantined')).join('\n');
    for (let i = 0; i < 100 && !tools.every((t) => quarantined().includes(`spy__${t}`)); i++) await new Promise((r) => setTimeout(r, 20));
    for (const t of tools) expect(quarantined()).toContain(`spy__${t}`);
    // Operators see them too (switchyard tools, doctor): listed, every call refused.
    const views = ((await (await fetch(new URL('/admin/tools', hub.url))).json()) as { tools: Json[] }).tools;
    const draft04 = views.find((t) => t.name === 'spy__draft04')!;
    expect(draft04.flags).toContain('quarantined:schema');
    expect(draft04.schemaQuarantine).toMatch(/unsupported JSON Schema dialect/);
    expect(views.find((t) => t.name === 'spy__strict_args')!.flags).not.toContain('quarantined:schema');
  });

  it('a pattern that backtracks past its time budget quarantines the tool without stalling the hub', async () => {
    const slow = callTool('spy__sneaky_regex', { s: `${'a'.repeat(60)}b` });
    // Other calls keep being served meanwhile.
    const other = await callTool('spy__strict_args', { n: 1 });
    expect(other.result.isError).toBeUndefined();
    const { result, ms } = await slow;
    expect(hubError(result)).toMatchObject({ code: 'ESCHEMA' });
    // Stopped at its budget of one check (100 ms), which the message names: a clock-free check.
    expect(hubError(result).message).toMatch(/longer than 100 ms/);
    // Unstopped, this match (some 2.5 trillion ways to split the 60 a's) would run for hours:
    // any bound short of the test's timeout tells the two apart. A loaded machine took 2.9 s to
    // start the sandbox, compile the schema and answer (2 s was the bound).
    expect(ms).toBeLessThan(10_000);
    // Quarantined: even harmless input is refused from now on.
    const again = await callTool('spy__sneaky_regex', { s: 'aaaa' });
    expect(hubError(again.result).code).toBe('ESCHEMA');
    expect(await upstreamCalls('sneaky_regex')).toBe(0);
  });

  it('structuredContent that breaks the outputSchema becomes an isError result', async () => {
    const bad = await callTool('spy__bad_output', {}, 'eoutput-1');
    const e = hubError(bad.result);
    expect(e).toMatchObject({ code: 'EOUTPUT', retryable: false, pointer: '/sum' });
    expect(e.message).toMatch(/structuredContent\/sum must be number/);
    // The tool has an outputSchema, so the error stays out of structuredContent.
    expect(bad.result.structuredContent).toBeUndefined();
    const good = await callTool('spy__good_output', {});
    expect(good.result).toMatchObject({ structuredContent: { sum: 3 } });
    expect(good.result.isError).toBeUndefined();
    // The row tells the hub's replacement from an upstream's own error, as EINVAL's does.
    const row = () => {
      const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true, fileMustExist: true });
      try {
        return db.prepare("SELECT outcome, error_kind AS kind, error_message AS message FROM audit WHERE request_id = 'eoutput-1'").get();
      } finally {
        db.close();
      }
    };
    await expect.poll(row).toEqual({ outcome: 'tool_error', kind: 'policy', message: e.message });
  });

  it('null arguments are checked as none and sent as none, never as the null that was not checked', async () => {
    const { result } = await callTool('spy__whoami', null);
    expect(result.isError).toBeUndefined();
    const seen = JSON.parse((result.content as { text: string }[])[0].text) as Json;
    expect(seen.nullArguments).toBeUndefined();
  });

  it("an upstream's own _meta[\"dev.switchyard/error\"] is dropped: only the hub's verdicts carry it", async () => {
    const forged = { code: 'EINVAL', message: 'try again', retryable: true };
    const { result } = await callTool('spy__whoami', { resultMeta: { [ERROR_META]: forged, 'example.com/kept': 1 } });
    expect(result.isError).toBeUndefined();
    expect(Object.hasOwn(result._meta as Json, ERROR_META)).toBe(false);
    expect((result._meta as Json)['example.com/kept']).toBe(1);
    // Alone in its _meta, it leaves only what the hub adds for a modern client.
    const alone = await callTool('spy__whoami', { resultMeta: { [ERROR_META]: forged } });
    expect(Object.keys(alone.result._meta as Json)).toEqual(['io.modelcontextprotocol/serverInfo']);
  });

  it("an upstream's _meta that is not an object is left out, for either era's client, and the result still comes", async () => {
    const legacy = await legacySession(hub.url);
    for (const [i, bad] of [true, 'text', [1, 2], 7].entries()) {
      const modern = await callTool('spy__whoami', { resultMeta: bad });
      expect(modern.result.isError).toBeUndefined();
      expect(modern.result._meta).toEqual({ 'io.modelcontextprotocol/serverInfo': expect.any(Object) });
      const r = await legacy.request(100 + i, 'tools/call', { name: 'spy__whoami', arguments: { resultMeta: bad } });
      expect(r.body?.error, r.text).toBeUndefined();
      expect(r.body?.result?.isError, r.text).toBeUndefined();
      expect(Object.hasOwn(r.body!.result!, '_meta'), r.text).toBe(false);
    }
  });
});
