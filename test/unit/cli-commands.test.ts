/** Which command modules the CLI loads: the one named first, else all (help and usage errors as the whole CLI's). */
import { describe, expect, it } from 'vitest';
import { COMMANDS, commandsToLoad } from '../../src/cli/commands.js';

describe('the CLI loads', () => {
  it('only the command named first', () => {
    expect(commandsToLoad(['servers', 'restart', 'x'])).toEqual(['servers']);
    expect(commandsToLoad(['ledger', 'query', '--limit', '5'])).toEqual(['ledger']);
  });

  it('every command when none is named first: help, a typo, an option before it, a name from Object.prototype', () => {
    const all = Object.keys(COMMANDS);
    expect(all).toHaveLength(13);
    for (const args of [[], ['--help'], ['servrs'], ['--config', 'x', 'start'], ['toString'], ['__proto__']]) expect(commandsToLoad(args)).toEqual(all);
  });

  it('each command module gives a command of its name', async () => {
    for (const [name, load] of Object.entries(COMMANDS)) expect(String((await load()).command).split(' ')[0]).toBe(name);
  });
});
