import { afterEach, describe, expect, it, vi } from 'vitest';
import { envMs } from '../../src/cli/env-ms.js';

const NAME = 'SWITCHYARD_TEST_ENV_MS';

describe('envMs (SWITCHYARD_STDOUT_FLUSH_MS, SWITCHYARD_STREAM_RETRY_MS)', () => {
  afterEach(() => {
    delete process.env[NAME];
    vi.restoreAllMocks();
  });

  it('is the default when unset or empty, the value when a whole number of ms, 0 included', () => {
    expect(envMs(NAME, 3000)).toBe(3000);
    process.env[NAME] = ' ';
    expect(envMs(NAME, 3000)).toBe(3000);
    process.env[NAME] = '250';
    expect(envMs(NAME, 3000)).toBe(250);
    process.env[NAME] = '0';
    expect(envMs(NAME, 3000)).toBe(0);
  });

  it('says a value that is no such number on stderr and uses the default', () => {
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    for (const bad of ['-1', '1.5', 'abc', '3s', '2147483648']) {
      process.env[NAME] = bad;
      expect(envMs(NAME, 3000), bad).toBe(3000);
    }
    expect(err).toHaveBeenCalledTimes(5);
    expect(String(err.mock.calls[0]![0])).toBe(`switchyard: ${NAME} must be a whole number of milliseconds, 0 or more; got "-1", using 3000\n`);
  });
});
