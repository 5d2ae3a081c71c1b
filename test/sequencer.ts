import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Small files that run long, started first. Without a results cache (CI's fresh checkout)
 * vitest starts the largest files first, so a small file of long runs came last and kept one
 * worker busy alone at the end: conformance-client.test.ts (1.4 KB, then ~90 s of conformance
 * runs) ended the suite ~45 s after the other worker was done. Add a file here when it is
 * small and takes half a minute or more. conformance-client.test.ts (15 scenario runs, ~55 s
 * in CI before they got cheaper), conformance.test.ts (five conformance lines, three of them
 * one after another on one hub), era-translation-conformance.test.ts (a hub start and one
 * conformance line; ~45 s in CI when it ran fourteen CLI processes, less since).
 *
 * The two conformance files are the suite's busiest on CPU (several conformance CLIs, hubs and
 * drivers at once): started together, one on each worker, they ran side by side for their
 * whole length (CI: 100 s and 88 s). So the second worker starts with
 * resource-subscriptions.test.ts (big, so near the front anyway), and conformance.test.ts
 * follows whichever is done first. Measured on the five files at the front (these four and
 * ledger-cli.test.ts) alone, the old order and this one in turn: 161 s, then 121 s; 204 s,
 * then 166 s (load 12-25 from other work on the machine).
 * conformance.test.ts took 23-37 s instead of 71-109 s, conformance-client 52-77 s instead of
 * 76-121 s; resource-subscriptions, beside conformance-client now, 81-110 s instead of 48-53 s.
 */
const FIRST = [
  'test/integration/conformance-client.test.ts',
  'test/integration/resource-subscriptions.test.ts',
  'test/integration/conformance.test.ts',
  'test/integration/era-translation-conformance.test.ts',
];

export class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification): number => {
      const i = FIRST.findIndex((p) => f.moduleId.endsWith(`/${p}`));
      return i < 0 ? FIRST.length : i;
    };
    // Array.prototype.sort is stable: the rest keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}
