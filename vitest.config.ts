import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Integration tests spawn real processes and bind loopback ports; two cores here.
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
  },
});
