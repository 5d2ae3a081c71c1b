import { defineConfig } from 'vitest/config';
import { LongFirstSequencer } from './test/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Integration tests spawn real processes and bind loopback ports; two cores here.
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
    // Small files of long runs first, so that none ends the run alone (test/sequencer.ts).
    sequence: { sequencer: LongFirstSequencer },
  },
});
