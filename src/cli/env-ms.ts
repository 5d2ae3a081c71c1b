/**
 * A duration in milliseconds from environment variable `name`: a whole number, 0 or more, or
 * `fallback` when the variable is unset or empty. Anything else is said once on stderr and the
 * default used: these variables tune waits of a running command, and a typo in one should not
 * stop a client's hub from starting.
 */
export function envMs(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (Number.isSafeInteger(n) && n >= 0 && n <= 2_147_483_647) return n;
  process.stderr.write(`switchyard: ${name} must be a whole number of milliseconds, 0 or more; got ${JSON.stringify(raw)}, using ${fallback}\n`);
  return fallback;
}
