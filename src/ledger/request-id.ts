/**
 * A request's JSON-RPC id in the audit row's request_id (text). Ids of different types are
 * different requests (the number 1 and the string "1"), which String(id) made one: `ledger query
 * --request-id 1` listed both, and nothing told them apart. Stored now as: a number as its
 * digits (as it always was); a string as itself (as it always was), unless it would read as a
 * number, starts with a quote, is empty or holds a lone surrogate, then as its JSON form (`"1"`,
 * `""`, with the quotes).
 * So every row of a string id that is no number keeps its text, and one text is one id; the
 * empty text is a row with no id (a message refused before it had a valid one, the hub's own).
 * Rows written before hold a string id of digits as bare digits: read as the number; and the
 * empty string as empty text: read as no id.
 *
 * A column keeps MAX_TEXT characters. An id whose stored text would be longer (a string: the
 * hub takes ids of any length) is stored cut, in a form no whole id has: the JSON form of its
 * first characters, then CUT (`"abc…"…`): still a string, and seen to be cut. Every id with
 * those first characters is stored the same, which `--request-id` says when it is given one.
 */
import { MAX_TEXT } from './columns.js';

/** JSON's number grammar: what String(n) writes for a number id, and what a string must not look like bare. */
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** After the closing quote of a cut id's JSON form: a whole id's JSON form ends at its quote. */
const CUT = '…';

/**
 * The stored text of a request's id; '' for none (a message refused before it had a valid
 * id). An id the JSON-RPC message had no valid form of: String of it, as before.
 */
export function requestIdText(id: unknown): string {
  if (id === undefined) return '';
  if (typeof id !== 'string') return String(id);
  // A lone surrogate (valid in a JSON string as `\ud800`) would be stored as U+FFFD (columns.ts):
  // the id "\ud800" as the id "\ufffd". Its JSON form escapes it, and keeps it.
  const stored = id === '' || readsAsNumber(id) || id.charCodeAt(0) === QUOTE || !id.isWellFormed() ? JSON.stringify(id) : id;
  return stored.length <= MAX_TEXT ? stored : cutText(id);
}

const QUOTE = 0x22;
const MINUS = 0x2d;
const DOT = 0x2e;
const ZERO = 0x30;
const PLUS = 0x2b;

/**
 * JSON_NUMBER.test(s), by a scan: this runs on every call's id (a row's request_id), and most
 * ids fail at their first character, where the regular expression cost ~0.4k instructions.
 */
function readsAsNumber(s: string): boolean {
  const n = s.length;
  let i = s.charCodeAt(0) === MINUS ? 1 : 0;
  const lead = s.charCodeAt(i); // NaN past the end
  if (lead === ZERO) i++;
  else if (isDigit(lead)) while (isDigit(s.charCodeAt(++i)));
  else return false;
  if (s.charCodeAt(i) === DOT) {
    if (!isDigit(s.charCodeAt(++i))) return false;
    while (isDigit(s.charCodeAt(++i)));
  }
  // e (0x65) or E (0x45): the only characters that are 0x65 with bit 5 set.
  if ((s.charCodeAt(i) | 0x20) === 0x65) {
    const sign = s.charCodeAt(++i);
    if (sign === PLUS || sign === MINUS) i++;
    if (!isDigit(s.charCodeAt(i))) return false;
    while (isDigit(s.charCodeAt(++i)));
  }
  return i === n;
}

function isDigit(c: number): boolean {
  return c >= ZERO && c <= 0x39;
}

/** An id too long to keep: the JSON form of as many of its first characters (whole code points) as fit, then CUT. */
function cutText(id: string): string {
  let kept = 0;
  let size = 2 + CUT.length;
  for (const ch of id) {
    const w = JSON.stringify(ch).length - 2; // `"` is `\"`, a control `\u001b`
    if (size + w > MAX_TEXT) break;
    size += w;
    kept += ch.length;
  }
  return JSON.stringify(id.slice(0, kept)) + CUT;
}

/**
 * An id's type and its own text (a string's without the quotes it may be stored with), from the
 * stored text; `cut`: only its first characters were kept. '' (no id) reads as the string ''.
 */
export function requestIdOf(stored: string): { type: 'number' | 'string'; text: string; cut: boolean } {
  if (JSON_NUMBER.test(stored)) return { type: 'number', text: stored, cut: false };
  if (stored.startsWith('"')) {
    const cut = stored.endsWith(`"${CUT}`);
    try {
      const s = JSON.parse(cut ? stored.slice(0, -CUT.length) : stored) as unknown;
      if (typeof s === 'string') return { type: 'string', text: s, cut };
    } catch {
      const start = stored.length === MAX_TEXT ? cutByColumn(stored) : undefined;
      if (start !== undefined) return { type: 'string', text: start, cut: true };
      // Not one this hub stored: the text as it is.
    }
  }
  return { type: 'string', text: stored, cut: false };
}

/**
 * The start of a string id a hub before this one stored in its JSON form and the column cut
 * at MAX_TEXT, its closing quote gone (and perhaps half an escape): read as the text with its
 * quote, it was another id.
 */
function cutByColumn(stored: string): string | undefined {
  for (let drop = 0; drop <= 5; drop++) {
    try {
      const s = JSON.parse(`${stored.slice(0, stored.length - drop)}"`) as unknown;
      if (typeof s === 'string') return s;
    } catch {
      // Half an escape (`\`, `\u00`) at the end: one character fewer.
    }
  }
  return undefined;
}

/** A string id as a note shows it: JSON (no control character raw), a long one by its start and length. */
function shown(s: string): string {
  return s.length > 64 ? `${JSON.stringify(s.slice(0, 40))}… (${s.length} characters)` : JSON.stringify(s);
}

export interface RequestIdQuery {
  /** The text rows of this id hold. */
  stored: string;
  /** The id in words. */
  what: string;
  /** Only the first this many characters of the id are kept (it is longer than a row holds): rows of every id starting with them match. */
  cut?: number;
  /** For a number, or a string of a number's text: the id of the other type, whose rows are told of, not listed, and the option value that lists them. */
  other?: { stored: string; what: string; option: string };
}

/**
 * What `--request-id` (and /admin/ledger's `requestId`) selects, as stored: the value read as the
 * id's JSON form when it is one (`1` the number, `'"1"'` the string, `'""'` the empty string),
 * else as a string (`abc`). A number no JSON number keeps exactly (past 2^53) is refused
 * (RangeError): read as a double it would select another id (9007199254740993 is
 * 9007199254740992), and the hub records no such number id (it refuses the request).
 */
export function requestIdQuery(value: string): RequestIdQuery {
  if (JSON_NUMBER.test(value)) {
    const v = JSON.parse(value) as number;
    if (!Number.isFinite(v) || Math.abs(v) > Number.MAX_SAFE_INTEGER) {
      const n = value.length > 64 ? `${value.slice(0, 40)}… (${value.length} characters)` : value;
      throw new RangeError(
        `request id ${n} is no number a request id can be (an integer of at most 2^53 - 1 in size: the hub refuses a request with another, and its row has no id); in quotes ('"${value.length > 64 ? '…' : value}"') it is the string`,
      );
    }
    // As the hub stored it: the number's String() (`1.0` is 1).
    const n = String(v);
    return { stored: n, what: `the number ${n}`, other: { stored: requestIdText(value), what: `the string ${shown(value)}`, option: `'${JSON.stringify(value)}'` } };
  }
  let s: unknown = value;
  if (value.startsWith('"')) {
    try {
      s = JSON.parse(value);
    } catch {
      s = value;
    }
    if (typeof s !== 'string') s = value;
  }
  const str = s as string;
  const stored = requestIdText(str);
  const q: RequestIdQuery = { stored, what: `the string ${shown(str)}` };
  const of = requestIdOf(stored);
  if (of.cut) q.cut = of.text.length;
  if (JSON_NUMBER.test(str)) {
    const n = JSON.parse(str) as number;
    if (Number.isFinite(n) && Math.abs(n) <= Number.MAX_SAFE_INTEGER) q.other = { stored: String(n), what: `the number ${n}`, option: String(n) };
  }
  return q;
}
