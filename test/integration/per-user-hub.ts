/**
 * A per-user HTTP fixture (test/fixtures/catalog/per-user-http.mjs, or its legacy twin) and a real
 * hub in front of it as the server `u`, where alice calls it with an upstream account of her own
 * (`Bearer alice-upstream`) and every other principal with the hub's shared one: the set-up of
 * the tests of principals' own connections and lists.
 */
import { waitForReadyWith } from '../helpers/auth.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import type { Json } from '../helpers/wire.js';

export const PER_USER_HTTP = 'test/fixtures/catalog/per-user-http.mjs';

/** The fixture (`fixture`, with `env`), and the hub of `auth` (and `config` besides) ready for `readyKey`. */
export async function perUserHub(
  auth: Json,
  readyKey: string,
  opts: { fixture?: string; env?: Record<string, string>; config?: Json } = {},
): Promise<{ up: HttpFixture; hub: HubProcess }> {
  const up = await startHttpFixture(opts.fixture ?? PER_USER_HTTP, opts.env ?? {});
  let hub: HubProcess | undefined;
  try {
    hub = await startHub({ auth, ...opts.config, servers: { u: { url: up.url, credentials: { alice: { headers: { authorization: 'Bearer alice-upstream' } } } } } });
    await waitForReadyWith(hub.url, ['u'], readyKey);
    return { up, hub };
  } catch (err) {
    // Not handed out: stopped here, as the test's afterAll would have.
    await stopPerUserHub(hub, up);
    throw err;
  }
}

/** The hub, then its fixture (either may not have started). */
export async function stopPerUserHub(hub: HubProcess | undefined, up: HttpFixture | undefined): Promise<void> {
  await hub?.stop();
  await up?.stop();
}
