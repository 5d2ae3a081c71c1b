import { afterEach, describe, expect, it, vi } from 'vitest';
import { envMs } from '../../src/env-ms.js';

const NAME = 'SWITCHYARD_TEST_ENV_MS';

describe('envMs (SWITCHYARD_STDOUT_FLUSH_MS, SWITCHYARD_STREAM_RETRY_MS, SWITCHYARD_KEEPALIVE_MS)', () => {
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
    for (const bad of ['-1', '1.5', 'abc', '3s', '2147483648', '1e3', '0x10']) {
      process.env[NAME] = bad;
      expect(envMs(NAME, 3000), bad).toBe(3000);
    }
    expect(err).toHaveBeenCalledTimes(7);
    expect(String(err.mock.calls[0]![0])).toBe(`switchyard: ${NAME} must be a whole number of milliseconds, 0 or more; got "-1", using 3000\n`);
  });

  it('takes a lower bound (the keep-alive interval: 100 ms or more)', () => {
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    process.env[NAME] = ' 30000 ';
    expect(envMs(NAME, 15_000, 100)).toBe(30_000);
    process.env[NAME] = '100';
    expect(envMs(NAME, 15_000, 100)).toBe(100);
    for (const low of ['0', '99']) {
      process.env[NAME] = low;
      expect(envMs(NAME, 15_000, 100), low).toBe(15_000);
    }
    expect(String(err.mock.calls[1]![0])).toBe(`switchyard: ${NAME} must be a whole number of milliseconds, 100 or more; got "99", using 15000\n`);
  });
});
