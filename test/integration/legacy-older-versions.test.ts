/**
 * Legacy clients that negotiate an older revision (2024-11-05, 2025-03-26) get results their
 * revision defines: content is text, image and embedded resources (audio from 2025-03-26), and
 * there is no structuredContent or outputSchema (both from 2025-06-18, with resource_link). A
 * content type a client's schema lacks fails its whole result there. Clients at 2025-06-18 and
 * 2025-11-25 get the results as the server sent them. Real hub (`switchyard stdio`) over real
 * pipes, each revision initialized in turn on one pipe; upstream: the SDK v1 fixture
 * content-kinds.mjs.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';

type Json = Record<string, any>;

/** The content types each revision's schema defines for tool results and prompt messages. */
const KINDS: Record<string, string[]> = {
  '2024-11-05': ['text', 'image', 'resource'],
  '2025-03-26': ['text', 'image', 'audio', 'resource'],
  '2025-06-18': ['text', 'image', 'audio', 'resource_link', 'resource'],
  '2025-11-25': ['text', 'image', 'audio', 'resource_link', 'resource'],
};
const OLDER = ['2024-11-05', '2025-03-26'];

let c: LineClient;
let n = 0;

beforeAll(() => {
  const d = mkdtempSync(join(tmpdir(), 'switchyard-older-versions-'));
  const file = join(d, 'hub.config.json');
  writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, servers: { ck: nodeServer('test/fixtures/servers/content-kinds.mjs') } }));
  c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
});

afterAll(() => c?.kill());

async function ask(method: string, params: Json = {}): Promise<Json> {
  const r = await c.request({ jsonrpc: '2.0', id: ++n, method, params }, 30_000);
  expect(r.error, JSON.stringify(r)).toBeUndefined();
  return r.result;
}

describe.each(Object.keys(KINDS))('a legacy client at %s', (version) => {
  const older = OLDER.includes(version);

  it('is answered initialize at its revision, and gets tool results and prompts its revision defines', async () => {
    // Each revision a session of its own on the one pipe (initialize again starts one).
    const init = await ask('initialize', { protocolVersion: version, capabilities: {}, clientInfo: { name: `v-${version}`, version: '1' } });
    expect(init.protocolVersion).toBe(version);
    c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));

    const tools = (await ask('tools/list')).tools as Json[];
    for (const name of ['ck__kinds', 'ck__structured_only']) expect('outputSchema' in tools.find((t) => t.name === name)!, name).toBe(!older);

    const kinds = await ask('tools/call', { name: 'ck__kinds', arguments: {} });
    for (const b of kinds.content) expect(KINDS[version], JSON.stringify(b)).toContain(b.type);
    expect('structuredContent' in kinds).toBe(!older);
    const link = kinds.content[3];
    if (older) {
      // Named as text, its annotations kept.
      expect(link).toEqual({ type: 'text', text: 'The guide (resource link: file:///docs/guide.md, text/markdown): How it works', annotations: { audience: ['user'] } });
      expect(kinds.content[2]).toEqual(version === '2024-11-05' ? { type: 'text', text: '[audio (audio/wav) left out: protocol version 2024-11-05 has no audio content]' } : expect.objectContaining({ type: 'audio', mimeType: 'audio/wav' }));
      // The text item the tool wrote its structured content in is kept; nothing is added.
      expect(kinds.content).toHaveLength(5);
      expect(kinds.content[0]).toEqual({ type: 'text', text: '{"count":5}' });
    } else {
      expect(link).toMatchObject({ type: 'resource_link', uri: 'file:///docs/guide.md', name: 'guide' });
      expect(kinds.structuredContent).toEqual({ count: 5 });
    }

    const only = await ask('tools/call', { name: 'ck__structured_only', arguments: {} });
    // No text item carried it: its JSON is added as one, rather than lost.
    if (older) expect(only).toEqual({ content: [expect.objectContaining({ type: 'image' }), { type: 'text', text: '{"ok":true}' }] });
    else expect(only).toMatchObject({ content: [expect.objectContaining({ type: 'image' })], structuredContent: { ok: true } });

    const prompt = await ask('prompts/get', { name: 'ck__linked' });
    for (const m of prompt.messages) expect(KINDS[version]).toContain(m.content.type);
    expect(prompt.messages[1].content).toEqual(older ? { type: 'text', text: 'guide (resource link: file:///docs/guide.md)' } : { type: 'resource_link', uri: 'file:///docs/guide.md', name: 'guide' });
  }, 60_000);
});
