/**
 * Upstream text reaches the operator's terminal through the CLI (server names, errors, tool
 * names): control sequences and bidi overrides never go out raw, JSON output stays the same
 * JSON (escaped), and CSV cells a spreadsheet would run as formulas stay text. A hostile real
 * upstream process behind the real built hub; the real CLI binary.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernPost, waitForReady } from '../helpers/wire.js';
import { waitForRows } from './ledger-helpers.js';

const NAME = 'evil\u001b]0;pwned\u0007\u001b[2J';
const RAW = /[\u001b\u0007\u009b\u202e]/;

let hub: HubProcess;
let db: string;

beforeAll(async () => {
  hub = await startHub({ servers: { evil: nodeServer('test/fixtures/quirks/terminal-escapes.mjs') } });
  db = join(hub.dir, 'ledger.db');
  await waitForReady(hub.url, ['evil']);
  await modernPost(hub.url, 1, 'tools/call', { name: 'evil__echo', arguments: {} });
  await waitForRows(db, { tool: 'evil__echo' });
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const cli = (args: string[]) =>
  new Promise<string>((resolve, reject) =>
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, timeout: 15_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout))),
  );

describe('upstream text in the CLI', () => {
  it('servers: no control sequence on screen; --json keeps the name, escaped', async () => {
    const text = await cli(['servers', '--url', hub.url]);
    expect(text).toContain('evil?]0;pwned??[2J');
    expect(text).not.toMatch(RAW);
    const json = await cli(['servers', '--json', '--url', hub.url]);
    expect(json).not.toMatch(RAW);
    expect((JSON.parse(json) as { serverInfo?: { name?: string } }[])[0]?.serverInfo?.name).toBe(NAME);
  });

  it('ledger export: CSV without control sequences, a formula kept as text; JSON lines escaped', async () => {
    const csv = await cli(['ledger', 'export', '--format', 'csv', '--db', db, '--tool', 'evil__echo']);
    expect(csv).not.toMatch(RAW);
    expect(csv).toContain(`"'=HYPERLINK(""http://x.example"") ?[31mred?[0m ?gnp.exe ?31m"`);
    const jsonl = await cli(['ledger', 'query', '--json', '--db', db, '--tool', 'evil__echo']);
    expect(jsonl).not.toMatch(RAW);
    expect((JSON.parse(jsonl.split('\n')[0]!) as { errorMessage: string }).errorMessage).toContain('\u202egnp.exe \u009b31m');
  });
});
