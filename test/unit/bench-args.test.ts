/**
 * The option reading of the bench's small scripts (bench/lib/args.mjs): a number option given
 * something else stops the script instead of benchmarking NaN servers or NaN rounds.
 */
import { describe, expect, it } from 'vitest';
import { numberOption, option } from '../../bench/lib/args.mjs';

describe('bench options', () => {
  it('reads the value after the flag, or the default', () => {
    expect(option('name', 'd', ['--name', 'x'])).toBe('x');
    expect(option('name', 'd', ['--other', 'x'])).toBe('d');
    expect(option('name', 'd', ['--name'])).toBe('d');
    expect(numberOption('rounds', 5, ['--rounds', '15'])).toBe(15);
    expect(numberOption('rounds', 5, [])).toBe(5);
    expect(numberOption('port', 0, ['--port', '0'])).toBe(0);
  });

  it('refuses a number option that is not a number, naming the flag', () => {
    expect(() => numberOption('rounds', 5, ['--rounds', 'many'])).toThrow('--rounds takes a number, not "many"');
    expect(() => numberOption('rounds', 5, ['--rounds', ''])).toThrow('--rounds takes a number');
    expect(() => numberOption('tools', 5, ['--tools', '--servers'])).toThrow('--tools takes a number, not "--servers"');
  });
});
