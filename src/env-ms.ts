/**
 * A duration in milliseconds from environment variable `name`: a whole number of at least `min`
 * (digits only), or `fallback` when the variable is unset or empty. Anything else is said once on
 * stderr and the default used: these variables tune waits of a running hub or command, and a typo
 * in one should not stop a client's hub from starting.
 */
export function envMs(name: string, fallback: number, min = 0): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
  if (Number.isSafeInteger(n) && n >= min && n <= 2_147_483_647) return n;
  process.stderr.write(`switchyard: ${name} must be a whole number of milliseconds, ${min} or more; got ${JSON.stringify(raw.slice(0, 40))}, using ${fallback}\n`);
  return fallback;
}
