/**
 * A server's questions put to a legacy client that negotiated an older revision. Sampling: its
 * messages' content as that revision has it (one block a message, and no tool_use/tool_result
 * blocks, before 2025-11-25; no audio before 2025-03-26). A one-block array is unwrapped; what
 * such a client cannot take (audio at 2024-11-05, several blocks or a tool block before
 * 2025-11-25) is refused to the server, -32602 saying why,
 * and the client is not asked. Elicitation before 2025-11-25: a single-select with titled options
 * (`oneOf`) is put as that revision's `enum` with `enumNames`; a multi-select (an array) is
 * refused so. Real hub (`switchyard stdio`) over real pipes, a raw client
 * initializing each revision in turn on one pipe; upstream: the SDK v1 translation fixture.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';
import { LEGACY_FIXTURE } from '../fixtures/translation/peers.js';

type Json = Record<string, any>;

let c: LineClient;
let n = 0;
/** The sampling requests the client was sent, answered as they come. */
const asked: Json[] = [];
/** The elicitations the client was sent, answered (accept, colour "g") as they come. */
const elicited: Json[] = [];
let answering: NodeJS.Timeout;

beforeAll(async () => {
  const d = mkdtempSync(join(tmpdir(), 'switchyard-older-sampling-'));
  const file = join(d, 'hub.config.json');
  writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, servers: { ls: nodeServer(LEGACY_FIXTURE, [], { SERVER_NAME: 'older-sampling' }) } }));
  c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
  answering = setInterval(() => {
    for (let i = c.received.length - 1; i >= 0; i--) {
      const m = c.received[i];
      if (m.method === 'elicitation/create') {
        c.received.splice(i, 1);
        elicited.push(m.params);
        c.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { action: 'accept', content: { colour: 'g' } } }));
        continue;
      }
      if (m.method !== 'sampling/createMessage') continue;
      c.received.splice(i, 1);
      asked.push(m.params);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { role: 'assistant', content: { type: 'text', text: 'heard' }, model: 'm' } }));
    }
  }, 10);
});

afterAll(() => {
  clearInterval(answering);
  c?.kill();
});

async function ask(method: string, params: Json = {}): Promise<Json> {
  const r = await c.request({ jsonrpc: '2.0', id: ++n, method, params }, 30_000);
  expect(r.error, JSON.stringify(r)).toBeUndefined();
  return r.result;
}

async function session(version: string): Promise<void> {
  const init = await ask('initialize', { protocolVersion: version, capabilities: { sampling: {}, elicitation: {} }, clientInfo: { name: `s-${version}`, version: '1' } });
  expect(init.protocolVersion).toBe(version);
  c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  for (let i = 0; !((await ask('tools/list')).tools as Json[]).some((t) => t.name === 'ls__sample_blocks'); i++) {
    if (i > 100) throw new Error('the server did not come up');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The tool's answer, and the sampling request the client was sent for it (undefined: none). */
async function sample(blocks: string): Promise<{ text: string; isError: boolean; sent: Json | undefined }> {
  const before = asked.length;
  const r = await ask('tools/call', { name: 'ls__sample_blocks', arguments: { blocks } });
  return { text: r.content[0].text, isError: r.isError === true, sent: asked.slice(before)[0] };
}

describe('a sampling request to a legacy client at an older revision', () => {
  it('2024-11-05: audio is refused to the server saying why, and the client is not asked', async () => {
    await session('2024-11-05');
    const r = await sample('audio');
    expect(r.sent).toBeUndefined();
    expect(r.isError).toBe(true);
    expect(r.text).toMatch(/^sampling refused: -32602 .*protocol version 2024-11-05.*audio, which came with 2025-03-26/);
  }, 60_000);

  it('2025-03-26: audio reaches the client; a one-block array is unwrapped; two blocks are refused', async () => {
    await session('2025-03-26');
    const audio = await sample('audio');
    expect(audio.text).toBe('sampled text=heard');
    expect(audio.sent?.messages[0].content).toMatchObject({ type: 'audio', mimeType: 'audio/wav' });
    const one = await sample('one');
    expect(one.text).toBe('sampled text=heard');
    expect(one.sent?.messages[0].content).toEqual({ type: 'text', text: 'Transcribe this' });
    const two = await sample('two');
    expect(two.sent).toBeUndefined();
    expect(two.text).toMatch(/^sampling refused: -32602 .*2 content blocks/);
  }, 60_000);

  it('2025-06-18: tool_use and tool_result blocks (tool-enabled sampling) are refused to the server, and the client is not asked', async () => {
    await session('2025-06-18');
    const r = await sample('tools');
    expect(r.sent).toBeUndefined();
    expect(r.isError).toBe(true);
    expect(r.text).toMatch(/^sampling refused: -32602 .*protocol version 2025-06-18.*message 1 holds a tool_use block, which came with 2025-11-25/);
  }, 60_000);

  it('2025-11-25: the request as the server sent it', async () => {
    await session('2025-11-25');
    const two = await sample('two');
    expect(two.text).toBe('sampled text=heard');
    expect(two.sent?.messages[0].content).toHaveLength(2);
    const tools = await sample('tools');
    expect(tools.text).toBe('sampled text=heard');
    expect(tools.sent?.messages.map((m: Json) => m.content.type)).toEqual(['text', 'tool_use', 'tool_result']);
    expect(tools.sent?.messages[2].content).toEqual({ type: 'tool_result', toolUseId: 'tu1', content: [{ type: 'text', text: 'sunny' }] });
  }, 60_000);
});

describe('a form elicitation to a legacy client at an older revision', () => {
  /** The tool's answer, and the elicitation the client was sent for it (undefined: none). */
  async function choose(kind: string): Promise<{ text: string; sent: Json | undefined }> {
    const before = elicited.length;
    const r = await ask('tools/call', { name: 'ls__elicit_choice', arguments: { kind } });
    return { text: r.content[0].text, sent: elicited.slice(before)[0] };
  }

  it('2025-06-18: a titled single-select is put as enum with enumNames; a multi-select is refused to the server', async () => {
    await session('2025-06-18');
    const titled = await choose('titled');
    expect(titled.sent?.requestedSchema.properties.colour).toEqual({ type: 'string', title: 'Colour', enum: ['r', 'g'], enumNames: ['Red', 'Green'] });
    expect(titled.text).toBe('action=accept content={"colour":"g"}');
    const multi = await choose('multi');
    expect(multi.sent).toBeUndefined();
    expect(multi.text).toMatch(/^elicitation refused: -32602 .*protocol version 2025-06-18: field "colour" is a multi-select, which came with 2025-11-25/);
  }, 60_000);

  it('2025-11-25: both as the server sent them', async () => {
    await session('2025-11-25');
    const titled = await choose('titled');
    expect(titled.sent?.requestedSchema.properties.colour.oneOf).toHaveLength(2);
    const multi = await choose('multi');
    expect(multi.sent?.requestedSchema.properties.colour.type).toBe('array');
  }, 60_000);
});
