/**
 * What a server's failed list says of the values it wrote: a resultType no list can have, a
 * nextCursor that is no string. The error is the server's listError (/healthz, the admin API,
 * `switchyard doctor`): the value is quoted cut and redacted, as other upstream text on an error
 * path, not whole (a server chose its length) nor with a credential it held. A legacy server's
 * list is of its era, where resultType is no field: one it writes of its own is not judged.
 * Real built hub, the paging-server fixture of both eras over stdio.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { serverHealth, waitUntil } from './faults-helpers.js';
import { MAX_QUOTED_TEXT } from '../../src/catalog/fetch-list.js';

const PAGING = 'test/fixtures/catalog/paging-server.mjs';
const SECRET = 'Hunter2SecretValue';

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({
    servers: {
      long: nodeServer(PAGING, [], { N: '2', PAGE: '5', RESULT_TYPE: `task password=${SECRET} ${'x'.repeat(20_000)}` }),
      short: nodeServer(PAGING, [], { N: '2', PAGE: '5', RESULT_TYPE: `password=${SECRET}` }),
      cursor: nodeServer(PAGING, [], { N: '4', PAGE: '2', BAD_CURSOR: JSON.stringify({ k: `password=${SECRET}` }) }),
      legacy: nodeServer(PAGING, [], { ERA: 'legacy', N: '2', PAGE: '5', RESULT_TYPE: 'no-such-type' }),
    },
  });
}, 60_000);
afterAll(async () => {
  await hub?.stop();
});

/** The server's listError once its first list (at ready) has failed. */
const listError = (id: string) => waitUntil(`${id}'s listError`, async () => (await serverHealth(hub.url, id)).listError ?? undefined);

describe("a list's error quoting what its server wrote", () => {
  it('quotes a resultType cut and redacted', async () => {
    const long = await listError('long');
    expect(long).toMatch(/^tools\/list answered with resultType "task password=\[redacted:credential\] x+…, which a list cannot have$/);
    expect(long.length).toBeLessThan(MAX_QUOTED_TEXT + 80);
    const short = await listError('short');
    expect(short).toBe('tools/list answered with resultType "password=[redacted:credential]", which a list cannot have');
    expect(hub.logs.join('\n')).not.toContain(SECRET);
  });

  it('quotes a nextCursor that is no string redacted', async () => {
    const err = await listError('cursor');
    expect(err).toBe('tools/list answered with a nextCursor that is no string (page 1): {"k":"password=[redacted:credential]"}');
  });

  it("takes a legacy server's list whatever resultType it writes", async () => {
    await waitUntil("legacy's tools", async () => (await serverHealth(hub.url, 'legacy')).tools === 2);
    expect((await serverHealth(hub.url, 'legacy')).listError).toBeNull();
  });
});
