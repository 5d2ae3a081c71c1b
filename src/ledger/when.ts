const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * A point in time from the CLI: a duration back from now ("30m", "1h", "2d", "1.5h") or an
 * ISO 8601 date/time. Returns epoch ms, or throws with a message fit for a person.
 */
export function parseWhen(text: string, now: number = Date.now()): number {
  const s = text.trim();
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$/.exec(s);
  if (m) return Math.round(now - Number(m[1]) * UNIT_MS[m[2]]);
  // Only things that look like dates: Date.parse alone accepts odd strings like "1".
  if (/^\d{4}-\d{2}-\d{2}/.test(s)) {
    const t = Date.parse(s);
    if (Number.isFinite(t)) return t;
  }
  throw new Error(`not a time: "${text}" (use a duration back from now such as 30m, 1h, 2d, or an ISO date such as 2026-01-31T12:00:00Z)`);
}
