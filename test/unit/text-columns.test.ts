/** The CLI's tables line up on a terminal whatever script the names are in. */
import { describe, expect, it } from 'vitest';
import { serversTable } from '../../src/cli/servers.js';
import type { ServerView } from '../../src/downstream/admin-views.js';
import { table } from '../../src/ledger/format.js';
import { alignColumns, displayWidth } from '../../src/text-columns.js';

describe('columns on a terminal', () => {
  it('counts the columns a cell takes: two for CJK and emoji, none for a combining mark', () => {
    expect(displayWidth('notes')).toBe(5);
    expect(displayWidth('検索')).toBe(4);
    expect(displayWidth('메모')).toBe(4);
    expect(displayWidth('🔍x')).toBe(3);
    expect(displayWidth('café')).toBe(4); // e + U+0301
    expect(displayWidth('ＡＢ')).toBe(4);
  });

  it('counts an emoji two columns whatever its block, and what joins it none', () => {
    for (const e of ['🚀', '✅', '⚡', '🫠', '❤️', '👍🏽', '🇯🇵', '👨‍👩‍👧']) expect([e, displayWidth(e)]).toEqual([e, 2]);
    expect(displayWidth('ok👍🏽')).toBe(4);
  });


  it('lines the servers table up after a name with a joiner or variation selector (shown as ?)', () => {
    const view = { transport: 'stdio', state: 'ready', era: '2025-11-25', protocolVersion: '2025-11-25', tools: 1, restarts: 0, lastError: null, since: 0, trust: 'untrusted', inFlight: 0, queued: 0, failMode: 'open' } as const;
    const rows = [{ ...view, id: 'a\u200db', serverInfo: { name: 'x', version: '1' } }, { ...view, id: 'ab', serverInfo: { name: 'x', version: '1' } }] as ServerView[];
    const lines = serversTable(rows, 0).trimEnd().split('\n');
    expect(lines[1]!.indexOf('ready')).toBe(lines[2]!.indexOf('ready'));
  });

  it('pads by those columns, so the column after a wide name starts where the others do', () => {
    const out = alignColumns([
      ['name', 'server', 'note'],
      ['検索ツール', 'jp', 'x'],
      ['search', 'en', 'y'],
    ]);
    const lines = out.trimEnd().split('\n');
    const at = (line: string, cell: string) => displayWidth(line.slice(0, line.indexOf(cell)));
    expect(new Set([at(lines[0]!, 'server'), at(lines[1]!, 'jp'), at(lines[2]!, 'en')]).size).toBe(1);
    // The ledger's table and the servers table are laid out by it.
    const ledger = table(['tool', 'outcome'], [['メモ__検索', 'ok'], ['memo__search', 'ok']]).trimEnd().split('\n');
    expect(at(ledger[1]!, 'ok')).toBe(at(ledger[2]!, 'ok'));
    const view = { transport: 'stdio', state: 'ready', era: '2025-11-25', protocolVersion: '2025-11-25', tools: 1, restarts: 0, lastError: null, since: 0, trust: 'untrusted', inFlight: 0, queued: 0, failMode: 'open' } as const;
    const servers = serversTable([{ ...view, id: 'メモ', serverInfo: { name: '検索', version: '1' } } as ServerView, { ...view, id: 'memo', serverInfo: { name: 'search', version: '1' } } as ServerView], 0).trimEnd().split('\n');
    expect(at(servers[1]!, 'ready')).toBe(at(servers[2]!, 'ready'));
  });
});
