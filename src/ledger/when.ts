/** The largest distance from 1970 a Date holds (ECMA-262 time values). */
const MAX_DATE_MS = 8.64e15;

/** A date, or a date and time (`T` or a space between), seconds and their fraction optional, and an optional offset (Z, ±HH:MM, ±HHMM, ±HH). */
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * A point in time from the CLI: a duration back from now ("30m", "1h", "2d", "1.5h"; with a
 * minus, "-1h", as many write it, the same) or an ISO 8601 date/time (UTC unless it names an
 * offset). Returns epoch ms, or throws with a message
 * fit for a person.
 */
export function parseWhen(text: string, now: number = Date.now()): number {
  const s = text.trim();
  const m = /^-?(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$/.exec(s);
  if (m) {
    const t = Math.round(now - Number(m[1]) * UNIT_MS[m[2]]);
    // A duration of 400 digits is Infinity: a time no Date holds fails later (prune prints it after pruning).
    if (Math.abs(t) <= MAX_DATE_MS) return t;
    throw new Error(`not a time: "${text}" is further back than a date can be`);
  }
  // ISO 8601 only, handed to Date.parse in its one exact form: Date.parse alone accepts odd
  // strings ("1"), and reads a date alone as UTC but a date and time as local time, and other
  // shapes it guesses at ("2026-12-04 10:00 PM", "2026-12-04, 22:20") as local time too.
  const d = ISO.exec(s);
  if (d) {
    // Date.parse rolls a day past its month's end over (2026-02-30 is March 2): refused.
    const [year, month, day] = [Number(d[1]), Number(d[2]), Number(d[3])];
    if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) throw new Error(`not a date: "${text}" (${d[1]}-${d[2]}-${d[3]} is no day of the calendar)`);
    // Without an offset, UTC, as every time the ledger prints is.
    const [, , , , hh = '00', mm = '00', ss = '00', frac = '', zone] = d;
    // ±HH (an hour-only offset, as ISO 8601 allows and PostgreSQL prints) is ±HH:00.
    const offset = zone === undefined || /^z$/i.test(zone) ? 'Z' : zone.includes(':') ? zone : zone.length === 3 ? `${zone}:00` : `${zone.slice(0, 3)}:${zone.slice(3)}`;
    // The fraction is added here: Date.parse drops the digits past milliseconds, which put a
    // row of that very millisecond on the wrong side of the time (`--until …:07.123999`, as
    // Python prints microseconds, left out the rows at .123).
    const t = Date.parse(`${d[1]}-${d[2]}-${d[3]}T${hh}:${mm}:${ss}${offset}`);
    if (Number.isFinite(t)) return t + (frac ? Number(`0${frac}`) * 1000 : 0);
  }
  throw new Error(`not a time: "${text}" (use a duration back from now such as 30m, 1h, 2d, or an ISO date such as 2026-01-31T12:00:00Z)`);
}

function daysIn(year: number, month: number): number {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
}
