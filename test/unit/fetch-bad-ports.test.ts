/** Ports fetch refuses (src/cli/fetch-bad-ports.ts): said of a config's listeners, and of the port start was given. */
import { describe, expect, it } from 'vitest';
import { badPortWarnings, fetchRefusesPort } from '../../src/cli/fetch-bad-ports.js';

const listen = (port: number, admin?: { port: number } | { path: string }) => ({ listen: { host: '127.0.0.1', port, admin } }) as Parameters<typeof badPortWarnings>[0];

describe('badPortWarnings', () => {
  it('names the listener and the setting or option its port came from; an ordinary port, or an admin socket, is none', async () => {
    expect(badPortWarnings(listen(7410))).toEqual([]);
    expect(badPortWarnings(listen(7410, { path: '/run/sy.sock' }))).toEqual([]);
    expect(badPortWarnings(listen(6667, { port: 10080 }))).toEqual([expect.stringMatching(/^listen\.port 6667: fetch refuses/), expect.stringMatching(/^listen\.admin\.port 10080: fetch refuses/)]);
    // start --port 6000 on a config of 7410: the option is named, not the file's setting.
    expect(badPortWarnings(listen(7410), 6000, '--port')).toEqual([expect.stringMatching(/^--port 6000: fetch refuses/)]);
  });

  it('the list is the one Node\'s own fetch refuses', async () => {
    for (const port of [1, 22, 6000, 6665, 6669, 10080, 7410, 8080, 3000]) {
      const refused = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(2_000) }).then(
        () => false,
        (err: { cause?: { message?: string } }) => err.cause?.message === 'bad port',
      );
      expect(fetchRefusesPort(port), String(port)).toBe(refused);
    }
  });
});
