/** The largest distance from 1970 a Date holds (ECMA-262 time values). */
const MAX_DATE_MS = 8.64e15;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * A point in time from the CLI: a duration back from now ("30m", "1h", "2d", "1.5h") or an
 * ISO 8601 date/time (UTC unless it names an offset). Returns epoch ms, or throws with a message
 * fit for a person.
 */
export function parseWhen(text: string, now: number = Date.now()): number {
  const s = text.trim();
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$/.exec(s);
  if (m) {
    const t = Math.round(now - Number(m[1]) * UNIT_MS[m[2]]);
    // A duration of 400 digits is Infinity: a time no Date holds fails later (prune prints it after pruning).
    if (Math.abs(t) <= MAX_DATE_MS) return t;
    throw new Error(`not a time: "${text}" is further back than a date can be`);
  }
  // Only things that look like dates: Date.parse alone accepts odd strings like "1".
  const d = /^(\d{4})-(\d{2})-(\d{2})/.exec(s);
  if (d) {
    // Date.parse rolls a day past its month's end over (2026-02-30 is March 2): refused.
    const [year, month, day] = [Number(d[1]), Number(d[2]), Number(d[3])];
    if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) throw new Error(`not a date: "${text}" (${d[0]} is no day of the calendar)`);
    // Without an offset, UTC, as every time the ledger prints is: Date.parse reads a date alone
    // as UTC but a date and time as local time, so "2026-12-04" and "2026-12-04T00:00" differed.
    const t = Date.parse(/^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(s) ? `${s.replace(' ', 'T')}Z` : s);
    if (Number.isFinite(t)) return t;
  }
  throw new Error(`not a time: "${text}" (use a duration back from now such as 30m, 1h, 2d, or an ISO date such as 2026-01-31T12:00:00Z)`);
}

function daysIn(year: number, month: number): number {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
}
