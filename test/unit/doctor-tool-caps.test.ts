import { describe, expect, it } from 'vitest';
import { toolCaps } from '../../src/cli/doctor.js';
import type { ToolView } from '../../src/downstream/admin-views.js';

const tool = (server: string, upstreamName: string, name = `${server}__${upstreamName}`) => ({ name, server, upstreamName, era: null, trust: 'untrusted', flags: [] }) as ToolView;

describe('doctor: tool caps per group', () => {
  it('counts what each group shows, as the hub does: servers, tool globs, deny, and a group of deny only', () => {
    const tools = [tool('a', 'read'), tool('a', 'delete'), tool('b', 'read'), tool('b', 'write')];
    const found = toolCaps(tools, {
      none: { servers: ['a'], deny: ['a__*'] },
      reads: { tools: ['read'] },
      one: { tools: ['delete'] },
      safe: { deny: ['*__delete', 'write'] },
      // A glob with the hub's separator is read on hub names only.
      hubOnly: { tools: ['*__read'] },
    });
    expect(found.map((f) => f.message)).toEqual([
      expect.stringMatching(/^the default endpoint exposes 4 tools/),
      expect.stringMatching(/^group "none" exposes 0 tools/),
      expect.stringMatching(/^group "reads" exposes 2 tools/),
      expect.stringMatching(/^group "one" exposes 1 tool \(/), // not "1 tools"
      expect.stringMatching(/^group "safe" exposes 2 tools/),
      expect.stringMatching(/^group "hubOnly" exposes 2 tools/),
    ]);
  });

  it("warns at each client's documented cap: VS Code 128 tools a request, Windsurf 100 in all", () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => tool('a', `t${i}`));
    const at = (n: number) => toolCaps(many(n), undefined)[0];
    // Windsurf's Cascade takes up to 100 tools (docs.windsurf.com, "Configuring MCP tools").
    expect(at(100)).toMatchObject({ level: 'ok', message: expect.stringContaining('Windsurf 100') });
    expect(at(101)).toMatchObject({ level: 'warn', message: expect.stringMatching(/over the cap of Windsurf \(100\)/) });
    expect(at(129)).toMatchObject({ level: 'warn', message: expect.stringMatching(/VS Code \(128\) and Windsurf \(100\)/) });
  });
});
