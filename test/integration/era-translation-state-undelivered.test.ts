/**
 * A modern client's retry of a 2026 upstream's `input_required` whose forward surely never
 * reached the upstream (its connection refused: the server is down) does not use up the hub's
 * requestState: the same retry, once the server is back, goes through. A retry that reached the
 * upstream still uses it (single use). Real modern HTTP fixture behind the real built hub, on
 * the raw wire; the fixture is stopped and started again on the same port.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json, type RawReply } from '../helpers/wire.js';
import { MODERN_FIXTURE, USER_CAPABILITIES } from '../fixtures/translation/peers.js';
import { queryRows } from './ledger-helpers.js';
import { freePortInRange } from '../helpers/port-range.js';

const ASKING = modernMeta({ [META_CAPS]: USER_CAPABILITIES });
let hub: HubProcess;
let port: number;
let stopFixture: (() => Promise<void>) | undefined;
let nextId = 1;

/** The modern fixture on `port` (the same one each time, so the hub's url stays right). */
function startFixture(): Promise<void> {
  const proc = spawn(process.execPath, [join(ROOT, MODERN_FIXTURE), '--http', String(port)], {
    cwd: ROOT,
    env: { ...process.env, SERVER_NAME: 'modern-http' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (!/LISTENING/.test(out)) return;
      stopFixture = () =>
        new Promise<void>((done) => {
          if (proc.exitCode !== null || proc.signalCode !== null) return done();
          proc.once('exit', () => done());
          proc.kill('SIGKILL');
        });
      resolve();
    });
    proc.once('exit', (code) => reject(new Error(`fixture exited with ${code}`)));
  });
}

async function request(method: string, params: Json, name: string): Promise<RawReply> {
  const id = nextId++;
  const r = await post(hub.url, modernBody(id, method, params, ASKING), modernHeaders(method, name));
  return { ...r, body: r.messages.find((m) => m.id === id) };
}

/** Sends `send` until the hub has the server back (a failure that never reached it), at most 20 s. */
async function onceBack(send: () => Promise<RawReply>, failedBeforeIt: (r: RawReply) => boolean): Promise<RawReply> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await send();
    if (!failedBeforeIt(r) || Date.now() > deadline) return r;
    await new Promise((res) => setTimeout(res, 200));
  }
}

beforeAll(async () => {
  // Outside the ephemeral range (TEST_PORTS): while the fixture is down, no listen(0) or outgoing
  // connection elsewhere on the machine can take its port before it starts there again.
  port = await freePortInRange();
  await startFixture();
  // One attempt per call: the refused connection is the answer at once.
  hub = await startHub({ servers: { mh: { url: `http://127.0.0.1:${port}/mcp`, retry: { maxAttempts: 1, budgetMs: 1000 } } } });
  await waitForReady(hub.url, ['mh']);
}, 60_000);
afterAll(async () => {
  await hub?.stop();
  await stopFixture?.();
});

describe('a retry of an input_required that never reached the upstream', () => {
  it('tools/call: leaves the requestState usable, and the same retry goes through once the server is back (then it is used)', async () => {
    const name = 'mh__elicit_form';
    const first = await request('tools/call', { name, arguments: {} }, name);
    const state = (first.body?.result as Json | undefined)?.requestState;
    expect(state, first.text).toMatch(/^sy1\./);
    const retry = { name, arguments: {}, requestState: state, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } };

    await stopFixture!();
    const down = await request('tools/call', retry, name);
    expect(down.body?.result, down.text).toMatchObject({ isError: true, content: [{ type: 'text', text: expect.stringMatching(/ECONNREFUSED|unavailable/) }] });

    await startFixture();
    const isDown = (r: RawReply) => (r.body?.result as Json | undefined)?.isError === true && /ECONNREFUSED|unavailable/.test(JSON.stringify(r.body?.result));
    const back = await onceBack(() => request('tools/call', retry, name), isDown);
    expect(back.body?.error, back.text).toBeUndefined();
    expect(back.body?.result, back.text).toMatchObject({ content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });

    // Delivered this time: used up.
    const replayed = await request('tools/call', retry, name);
    expect(replayed.body?.error, replayed.text).toMatchObject({ code: -32602, message: 'requestState was already used' });

    const outcomes = (await queryRows(join(hub.dir, 'ledger.db'), { tool: name })).map((r) => r.outcome);
    expect(outcomes[0]).toBe('input_required');
    expect(outcomes).toContain('unavailable');
    expect(outcomes.slice(-2)).toEqual(['ok', 'rpc_error']);
  }, 60_000);

  it('resources/read: the same', async () => {
    const uri = 'consent://modern-http/doc';
    const first = await request('resources/read', { uri }, uri);
    const state = (first.body?.result as Json | undefined)?.requestState;
    expect(state, first.text).toMatch(/^sy1\./);
    const retry = { uri, requestState: state, inputResponses: { who: { action: 'accept', content: { name: 'Bo' } } } };

    await stopFixture!();
    const down = await request('resources/read', retry, uri);
    expect(down.body?.error, down.text).toBeDefined();
    expect(down.body?.error?.message).not.toMatch(/requestState/);

    await startFixture();
    const isDown = (r: RawReply) => r.body?.error !== undefined && !/requestState/.test(String(r.body.error.message));
    const back = await onceBack(() => request('resources/read', retry, uri), isDown);
    expect(back.body?.error, back.text).toBeUndefined();
    expect(JSON.stringify(back.body?.result)).toContain('Bo');

    const replayed = await request('resources/read', retry, uri);
    expect(replayed.body?.error, replayed.text).toMatchObject({ code: -32602, message: 'requestState was already used' });
  }, 60_000);
});
