/**
 * `run()`, handing its failure (a rejection, or a throw before it returned a promise) to
 * `recover`. For layers whose async work is only for failures (retries, URL-step rounds): the
 * usual call that succeeds at once costs one derived promise, not an async function's frame
 * and awaits per call (measured, docs/BENCHMARKS.md, "Layers that cost a call only when they act").
 */
export function onFailure<T>(run: () => Promise<T>, recover: (err: unknown) => Promise<T>): Promise<T> {
  let first: Promise<T>;
  try {
    first = run();
  } catch (err) {
    first = Promise.reject(err as Error);
  }
  return first.then(undefined, recover);
}
