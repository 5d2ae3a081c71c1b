/**
 * The arguments of a call as the user is shown them when asked to confirm it (policy.confirm).
 * They are the model's (a prompt injection's, at worst), and the question is the user's one look
 * at them, so nothing in them may be out of sight or read as other than it is:
 *  - a string longer than STRING_SHOWN shows its start and its end and says how long it is. The
 *    whole text used to be cut at 400 characters, so a long value first pushed every argument
 *    after it out of the question: `{"content": "…", "path": "~/.ssh/authorized_keys"}` asked
 *    about the content alone;
 *  - control, format (bidi, zero-width), private-use and other invisible characters are written
 *    as JSON escapes: a U+202E made `report<U+202E>txt.exe` read as `reportexe.txt`, and Unicode tag
 *    characters (U+E0000…) carry ASCII text that displays as nothing;
 *  - past SUMMARY_MAX (arguments too many to show) the text ends saying how much is left out.
 * Values under credential-like keys stay `[redacted]` (ledger/redact.ts), as in the ledger.
 */
import { redact } from '../ledger/redact.js';

/** The longest string shown whole; a longer one shows its first HEAD and last TAIL characters. */
const STRING_SHOWN = 160;
const HEAD = 100;
const TAIL = 40;
/** The longest summary; past it the rest is said to be left out. */
const SUMMARY_MAX = 2000;

const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cs}\p{Default_Ignorable_Code_Point}\p{Bidi_Control}]/gu;

const count = (n: number): string => n.toLocaleString('en-US');

/** Each UTF-16 unit of `ch` as a JSON escape. */
function escaped(ch: string): string {
  let out = '';
  for (let i = 0; i < ch.length; i++) out += `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`;
  return out;
}

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff;

/** Code points in `s`, counted without an array of them (a value may be megabytes long). */
function codePoints(s: string): number {
  let n = s.length;
  for (let i = 1; i < s.length; i++) if (isLow(s.charCodeAt(i)) && isHigh(s.charCodeAt(i - 1))) n--;
  return n;
}

function shortened(s: string): string {
  if (s.length <= STRING_SHOWN) return s;
  const n = codePoints(s);
  if (n <= STRING_SHOWN) return s;
  // Cut between characters, never inside a surrogate pair.
  let head = s.slice(0, HEAD);
  if (isHigh(head.charCodeAt(head.length - 1))) head = head.slice(0, -1);
  let tail = s.slice(-TAIL);
  if (isLow(tail.charCodeAt(0))) tail = tail.slice(1);
  return `${head}…[${count(n)} characters in all]…${tail}`;
}

/** `v` (a redacted copy: no cycles, its depth bounded) with its long strings shortened. */
function shorten(v: unknown): unknown {
  if (typeof v === 'string') return shortened(v);
  if (Array.isArray(v)) return v.map(shorten);
  // fromEntries defines each key as data, a "__proto__" one too.
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shorten(x)]));
  return v;
}

/** The arguments as the confirmation shows them. */
export function argumentSummary(args: unknown): string {
  const text = (JSON.stringify(shorten(redact(args ?? {}))) ?? '{}').replace(INVISIBLE, escaped);
  if (text.length <= SUMMARY_MAX) return text;
  const cut = isHigh(text.charCodeAt(SUMMARY_MAX - 1)) ? SUMMARY_MAX - 1 : SUMMARY_MAX;
  return `${text.slice(0, cut)}… (${count(text.length - cut)} more characters of the arguments not shown)`;
}
