const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^([0-9]+)(ms|s|m|h|d)$/;

/**
 * Milliseconds of a config duration: a whole number of milliseconds, or a string such as
 * "500ms", "90s", "30m", "24h", "7d". Undefined for anything else.
 */
export function durationMs(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 ? v : undefined;
  if (typeof v !== 'string') return undefined;
  const m = DURATION.exec(v);
  if (!m) return undefined;
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  return Number.isSafeInteger(ms) ? ms : undefined;
}
