/**
 * `switchyard stdio` at the edges of its pipe, driven over real pipes on the real built binary:
 * a client answer that breaks JSON-RPC, a client that stops reading stdout, stopping (EOF,
 * SIGTERM, a second signal) with calls in flight, and ids shared by the two eras on one pipe.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';
import { queryRows } from './ledger-helpers.js';

type Json = Record<string, any>;

const MODERN = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A config in a fresh folder (its ledger there too); returns the folder. */
function configDir(prefix: string, config: Json): { dir: string; file: string; ledger: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const file = join(dir, 'hub.config.json');
  const ledger = join(dir, 'ledger.db');
  writeFileSync(file, JSON.stringify({ ledger: { path: ledger }, ...config }));
  return { dir, file, ledger };
}

function stdioHub(file: string): LineClient {
  return new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
}

async function initialize(c: LineClient, capabilities: Json = {}): Promise<void> {
  await c.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'pipe', version: '1' } } }, 30_000);
  c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
}

describe('a legacy stdio client answering a question with a response that is not well formed', () => {
  const INPUT_TIMEOUT_MS = 8_000;

  it('fails the question at once with the problem (never inputTimeoutMs), and the hub never answers the response', async () => {
    const { file } = configDir('switchyard-stdio-bad-answer-', { policy: { inputTimeoutMs: INPUT_TIMEOUT_MS }, servers: { tl: nodeServer('test/fixtures/translation/legacy-server.mjs') } });
    const c = stdioHub(file);
    try {
      await initialize(c, { elicitation: {} });
      let n = 0;
      for (const answer of ['"result":null', '"result":"str"', '"result":[1]', '"error":"no"']) {
        const id = ++n;
        c.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'tl__elicit_form', arguments: { who: `bad-${id}` } } }));
        const ask = await c.next((m) => m.method === 'elicitation/create' && m.params?.message?.includes(`bad-${id}`), 20_000);
        const t0 = Date.now();
        c.send(`{"jsonrpc":"2.0","id":${JSON.stringify(ask.id)},${answer}}`);
        const final = await c.next((m) => m.id === id && m.method === undefined, 20_000);
        expect(Date.now() - t0, answer).toBeLessThan(INPUT_TIMEOUT_MS / 2);
        expect(final.result?.isError, JSON.stringify(final)).toBe(true);
        expect(JSON.stringify(final.result)).toContain('the client answered elicitation/create with an invalid response');
        // JSON-RPC never answers a response.
        expect(c.received.filter((m) => m.id === ask.id && m.method === undefined), answer).toEqual([]);
      }
      // To nothing: dropped, not answered either.
      c.send('{"jsonrpc":"2.0","id":"sy-999","result":null}');
      c.send('{"jsonrpc":"2.0","result":"x"}');
      const pong = await c.request({ jsonrpc: '2.0', id: 'ping', method: 'ping' });
      expect(pong.result).toEqual({});
      expect(c.received.filter((m) => m.error !== undefined)).toEqual([]);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);
});
