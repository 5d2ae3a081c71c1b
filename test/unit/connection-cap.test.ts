/** The listener's default connection cap: the open-file limit less a reserve for the hub's own descriptors. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ADMIN_MAX_CONNECTIONS, adminMaxConnections, defaultMaxConnections, openFileLimit } from '../../src/transport/connection-cap.js';

describe('the default connection cap', () => {
  it('keeps 256 descriptors of a large limit, a quarter of a small one', () => {
    expect(defaultMaxConnections(20_000)).toBe(19_744);
    expect(defaultMaxConnections(1024)).toBe(768);
    expect(defaultMaxConnections(100)).toBe(75);
    expect(defaultMaxConnections(1)).toBe(1);
  });

  it("keeps the admin listener's own connections (listen.admin) out of it too", () => {
    expect(defaultMaxConnections(20_000, ADMIN_MAX_CONNECTIONS)).toBe(19_744 - 64);
    expect(defaultMaxConnections(100, ADMIN_MAX_CONNECTIONS)).toBe(11);
    expect(defaultMaxConnections(40, ADMIN_MAX_CONNECTIONS)).toBe(1);
  });

  it('scales the admin listener\'s cap down under a small limit: both listeners together never reach into the reserve', () => {
    expect(adminMaxConnections(20_000)).toBe(ADMIN_MAX_CONNECTIONS);
    expect(adminMaxConnections(1024)).toBe(ADMIN_MAX_CONNECTIONS);
    expect(adminMaxConnections(undefined)).toBe(ADMIN_MAX_CONNECTIONS); // unlimited
    for (const limit of [8, 40, 64, 85, 86, 100, 200, 400]) {
      const admin = adminMaxConnections(limit);
      const mcp = defaultMaxConnections(limit, admin)!;
      expect(admin + mcp, `limit ${limit}`).toBeLessThanOrEqual(defaultMaxConnections(limit)!);
      expect(admin * 4, `limit ${limit}`).toBeLessThanOrEqual(mcp);
      expect(admin, `limit ${limit}`).toBeGreaterThanOrEqual(1);
    }
    expect(adminMaxConnections(100)).toBe(15);
    expect(defaultMaxConnections(100, adminMaxConnections(100))).toBe(60);
  });

  it("reads the soft limit from /proc's limits, and none when it is unlimited or not there", () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-limits-'));
    const file = (soft: string) => {
      const f = join(dir, `${soft}.txt`);
      writeFileSync(f, `Limit                     Soft Limit           Hard Limit           Units     \nMax processes             63711                63711                processes \nMax open files            ${soft.padEnd(20)} 1048576              files     \n`);
      return f;
    };
    expect(openFileLimit(file('1024'))).toBe(1024);
    expect(openFileLimit(file('unlimited'))).toBeUndefined();
    expect(openFileLimit(join(dir, 'none'))).toBeUndefined();
  });
});
