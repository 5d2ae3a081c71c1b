/**
 * Signs of tool poisoning in the text a model reads (descriptions, titles, parameter
 * descriptions): instructions aimed at the model, hidden Unicode, whitespace padding, prompt
 * markup, requests to read secrets or send data elsewhere, extreme length. Heuristics: a flag is a reason for an
 * operator to look, and `policy.poisoning: "block"` hides flagged items. Used by the bundled
 * `description-checks` plugin, and for upstream server instructions (TextOptions.instructions).
 */
import { counted } from '../counted.js';

export type PoisonCode = 'hidden-unicode' | 'padding' | 'model-instructions' | 'markup' | 'secret-access' | 'exfiltration' | 'extreme-length';

export interface PoisonFlag {
  code: PoisonCode;
  /** Where it was found, e.g. "description" or "inputSchema.properties.path.description". */
  field: string;
  message: string;
}

export interface PoisonOptions {
  /** Characters of one text above which it is flagged (default 4000; for instructions 4 times that). */
  maxLength?: number;
}

export const DEFAULT_MAX_DESCRIPTION = 4000;
/**
 * How many times a description's length limit server instructions may be: one server's
 * instructions cover all its tools, and real ones run to several thousand characters.
 */
export const INSTRUCTIONS_LENGTH_FACTOR = 4;

// Invisible characters: every default-ignorable code point (zero-width spaces and joiners, soft
// hyphen, U+034F, the Hangul and Mongolian fillers and selectors, variation selectors U+FE00–FE0F
// and U+E0100–E01EF, the tag block U+E0000–E007F, which can spell out invisible ASCII), every
// bidi control (U+061C, U+200E/F, U+202A–202E, U+2066–2069) and every other format character
// (Cf, e.g. the interlinear annotation marks U+FFF9–FFFB). Some of them are ordinary text in
// emoji and in other scripts, and pass where they stand as that text does: see ordinaryUse.
const HIDDEN_CLASS = '[\\p{Cf}\\p{Default_Ignorable_Code_Point}\\p{Bidi_Control}]';
const HIDDEN_ALL = new RegExp(HIDDEN_CLASS, 'gu');
const HIDDEN_ONE = new RegExp(`^${HIDDEN_CLASS}$`, 'u');
// Hangul fillers stand where a space would: read as one, so that the words either side stay two.
const FILLERS = /[\u115F\u1160\u3164\uFFA0]/g;
const EMOJI = /^\p{Emoji}$/u;
const PICTOGRAPH = /^\p{Extended_Pictographic}$/u;
const SKIN_TONE = /^\p{Emoji_Modifier}$/u;

/** The code point that ends before index `i`, as a string ('' at the start). */
function before(text: string, i: number): string {
  if (i <= 0) return '';
  const lo = text.charCodeAt(i - 1);
  if (lo >= 0xdc00 && lo <= 0xdfff && i >= 2) {
    const hi = text.charCodeAt(i - 2);
    if (hi >= 0xd800 && hi <= 0xdbff) return text.slice(i - 2, i);
  }
  return text.slice(i - 1, i);
}

/**
 * Whether the invisible character at `i` is ordinary emoji text: one VS15/VS16 (U+FE0E/U+FE0F)
 * right after a character that has an emoji form ("❤️", "⚠️", a keycap "1️⃣"), or a zero-width
 * joiner between two pictographs, the first with its VS16 or skin tone ("👩🏽‍💻", "🏳️‍🌈"). A
 * second selector, any other selector, and the tag characters of subdivision flags are flagged.
 */
function emojiPart(text: string, i: number, cp: number): boolean {
  if (cp === 0xfe0f || cp === 0xfe0e) return EMOJI.test(before(text, i));
  if (cp !== 0x200d) return false;
  let prev = before(text, i);
  if (prev === '\uFE0F' || SKIN_TONE.test(prev)) prev = before(text, i - prev.length);
  const next = text.codePointAt(i + 1);
  return PICTOGRAPH.test(prev) && next !== undefined && PICTOGRAPH.test(String.fromCodePoint(next));
}

// Scripts whose spelling uses ZWNJ/ZWJ inside words: the cursive ones (Persian "می‌خواند", Urdu,
// Kurdish, Syriac, N'Ko, Mongolian) and the Brahmic ones (Devanagari half forms "क्‍या", Sinhala
// "ශ්‍රී", Malayalam chillu "ന്‍", Myanmar, Khmer…). Letters and marks of a script by
// Script_Extensions, so shared marks (Arabic harakat, the Devanagari danda) count.
const JOINING_SCRIPTS = [
  'Arabic', 'Syriac', 'Nko', 'Mandaic', 'Manichaean', 'Psalter_Pahlavi', 'Mongolian', 'Devanagari', 'Bengali', 'Gurmukhi', 'Gujarati', 'Oriya', 'Tamil', 'Telugu',
  'Kannada', 'Malayalam', 'Sinhala', 'Tibetan', 'Myanmar', 'Khmer', 'Tai_Tham', 'Balinese', 'Javanese',
].map((s) => new RegExp(`^(?=[\\p{L}\\p{M}])\\p{Script_Extensions=${s}}$`, 'u'));
const LETTER = /^\p{L}$/u;
const LETTER_OR_MARK = /^[\p{L}\p{M}]$/u;
const MARK = /^\p{M}$/u;
const MONGOLIAN_LETTER = /^(?=\p{L})\p{Script_Extensions=Mongolian}$/u;
const KHMER_LETTER = /^(?=[\p{L}\p{M}])\p{Script=Khmer}$/u;
const IDEOGRAPH = /^\p{Ideographic}$/u;
const RTL_LETTER = /(?=\p{L})[\p{Script=Arabic}\p{Script=Hebrew}\p{Script=Syriac}\p{Script=Thaana}\p{Script=Nko}]/gu;
const BIDI_MARK = /[\u061C\u200E\u200F]/g;

/** The code point that starts at index `i`, as a string ('' at the end). */
function at(text: string, i: number): string {
  const cp = text.codePointAt(i);
  return cp === undefined ? '' : String.fromCodePoint(cp);
}

/**
 * Whether the bidi marks (LRM, RLM, ALM) of a text are ordinary: it has right-to-left letters
 * (Arabic, Hebrew, Syriac, Thaana, N'Ko), where the marks set the direction of numbers,
 * punctuation and Latin names, and no more marks than such text needs: 2, and 1 more per 8
 * right-to-left letters. Marks in text without right-to-left letters, or many of them between a
 * few such letters, would be a way to spell bits, and are flagged.
 */
function bidiMarksOrdinary(text: string): boolean {
  const rtl = text.match(RTL_LETTER)?.length ?? 0;
  return rtl > 0 && (text.match(BIDI_MARK)?.length ?? 0) <= 2 + Math.floor(rtl / 8);
}

/**
 * Whether the invisible character at `i` is ordinary text where it stands (judged by its
 * neighbours): part of an emoji (emojiPart), or, not followed by another invisible character
 * (a run is flagged whatever it follows):
 * - ZWNJ/ZWJ after a letter or mark of a script whose spelling uses them (JOINING_SCRIPTS) and
 *   before one of the same script, or a ZWJ after such a mark (a virama) at a word's end;
 * - LRM/RLM/ALM in text with right-to-left letters (bidiMarksOrdinary);
 * - a soft hyphen between two letters ("Donau­dampf­schiff");
 * - a Mongolian free variation selector after a Mongolian letter, the Mongolian vowel separator
 *   between two;
 * - one ideographic variation selector (U+E0100–E01EF) after a Han ideograph ("葛󠄀");
 * - the Khmer inherent vowels U+17B4/17B5 after a Khmer letter.
 * Everything else is flagged: a joiner between Latin or Cyrillic letters, a bidi mark in
 * Latin-only text, bidi embeddings, overrides and isolates (U+202A–202E, U+2066–2069), zero-width
 * spaces (U+200B, U+2060–2064), tag characters, and selectors after anything else.
 */
function ordinaryUse(text: string, i: number, cp: number, bidiOk: () => boolean): boolean {
  if (emojiPart(text, i, cp)) return true;
  const next = at(text, i + (cp > 0xffff ? 2 : 1));
  if (next !== '' && HIDDEN_ONE.test(next)) return false;
  const prev = before(text, i);
  if (cp === 0x200c || cp === 0x200d) {
    const script = JOINING_SCRIPTS.find((re) => re.test(prev));
    if (!script) return false;
    return script.test(next) || (cp === 0x200d && MARK.test(prev) && !LETTER_OR_MARK.test(next));
  }
  if (cp === 0x200e || cp === 0x200f || cp === 0x61c) return bidiOk();
  if (cp === 0xad) return LETTER.test(prev) && LETTER.test(next);
  if ((cp >= 0x180b && cp <= 0x180d) || cp === 0x180f) return MONGOLIAN_LETTER.test(prev);
  if (cp === 0x180e) return MONGOLIAN_LETTER.test(prev) && MONGOLIAN_LETTER.test(next);
  if (cp >= 0xe0100 && cp <= 0xe01ef) return IDEOGRAPH.test(prev);
  if (cp === 0x17b4 || cp === 0x17b5) return KHMER_LETTER.test(prev);
  return false;
}

/** The first invisible character that is not ordinary text where it stands, or undefined. */
function firstHidden(text: string): { cp: number; index: number } | undefined {
  let bidi: boolean | undefined;
  const bidiOk = () => (bidi ??= bidiMarksOrdinary(text));
  for (const m of text.matchAll(HIDDEN_ALL)) {
    const cp = m[0].codePointAt(0)!;
    if (!ordinaryUse(text, m.index, cp, bidiOk)) return { cp, index: m.index };
  }
  return undefined;
}

// Letters drawn like Latin ones (a subset of Unicode's confusables: Cyrillic, Greek, Armenian,
// Cherokee, and Latin's own dotless i and small capitals, which NFKC leaves), read as those for
// the phrase rules only.
const LOOKALIKE: Record<string, string> = {
  ı: 'i', ȷ: 'j', ɑ: 'a', ɡ: 'g', ɩ: 'i', ᴀ: 'a', ʙ: 'b', ᴄ: 'c', ᴅ: 'd', ᴇ: 'e', ꜰ: 'f', ɢ: 'g', ʜ: 'h', ɪ: 'i', ᴊ: 'j', ᴋ: 'k', ʟ: 'l', ᴍ: 'm', ɴ: 'n',
  ᴏ: 'o', ᴘ: 'p', ʀ: 'r', ꜱ: 's', ᴛ: 't', ᴜ: 'u', ᴠ: 'v', ᴡ: 'w', ʏ: 'y', ᴢ: 'z',
  օ: 'o', ո: 'n', ս: 'u', հ: 'h', ց: 'g', զ: 'q', Օ: 'O', Ս: 'U', Տ: 'S',
  Ꭺ: 'A', Ᏼ: 'B', Ꮯ: 'C', Ꭰ: 'D', Ꭼ: 'E', Ꮐ: 'G', Ꮋ: 'H', Ꭵ: 'i', Ꭻ: 'J', Ꮶ: 'K', Ꮮ: 'L', Ꮇ: 'M', Ꮲ: 'P', Ꭱ: 'R', Ꮪ: 'S', Ꭲ: 'T', Ꮩ: 'V', Ꮃ: 'W', Ꮓ: 'Z',
  ѵ: 'v', Ѵ: 'V', ѡ: 'w', η: 'n', γ: 'y',
  а: 'a', е: 'e', ё: 'e', к: 'k', о: 'o', р: 'p', с: 'c', у: 'y', х: 'x', ѕ: 's', і: 'i', ї: 'i', ј: 'j', ԁ: 'd', ԛ: 'q', ԝ: 'w', һ: 'h', ӏ: 'l',
  А: 'A', В: 'B', Е: 'E', К: 'K', М: 'M', Н: 'H', О: 'O', Р: 'P', С: 'C', Т: 'T', Х: 'X', Ѕ: 'S', І: 'I', Ј: 'J', Ү: 'Y',
  α: 'a', ε: 'e', ι: 'i', κ: 'k', ν: 'v', ο: 'o', ρ: 'p', υ: 'u', χ: 'x',
  Α: 'A', Β: 'B', Ε: 'E', Ζ: 'Z', Η: 'H', Ι: 'I', Κ: 'K', Μ: 'M', Ν: 'N', Ο: 'O', Ρ: 'P', Τ: 'T', Υ: 'Y', Χ: 'X',
};
const MARKS = /\p{M}/gu;
const LOOKALIKES = new RegExp(`[${Object.keys(LOOKALIKE).join('')}]`, 'g');

// Line breaks, and whether the text before one ends a sentence (closing quotes, brackets and
// Markdown emphasis after the mark count as its end).
const LINE_BREAK = /[\n\r\v\f\u0085\u2028\u2029]/;
const SENTENCE_END = /[.!?:;]["'”’)\]*_`]*$/;

// Character references (Markdown renders HTML's: "&lt;IMPORTANT&gt;", "&#73;gnore") and percent
// escapes of printable ASCII ("Ignore%20all%20previous"): a model reads through both.
const ESCAPED = /&(?:#(\d{1,7})|#x([\da-f]{1,6})|(lt|gt|amp|quot|apos|nbsp));|%([2-6][\da-f]|7[\da-e])/gi;
const NAMED_REFS: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'", nbsp: '\u00A0' };

/** The text with its character references and percent escapes decoded, once. */
function unescapeText(text: string): string {
  if (!text.includes('&') && !text.includes('%')) return text;
  return text.replace(ESCAPED, (m, dec?: string, hex?: string, name?: string, pct?: string) => {
    if (name) return NAMED_REFS[name.toLowerCase()]!;
    const cp = pct ? parseInt(pct, 16) : dec ? Number(dec) : parseInt(hex!, 16);
    return cp > 0 && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff) ? String.fromCodePoint(cp) : m;
  });
}

/**
 * The text the phrase rules read: character references and percent escapes decoded,
 * compatibility forms folded (NFKC: fullwidth and styled letters become ASCII), invisible
 * characters and combining marks dropped, look-alike letters read as Latin, and every run of whitespace (line breaks, U+2028, no-break and ideographic spaces) one
 * space, except a run with a line break after a line that ends a sentence ([.!?:;]): that is one
 * "\n", which the gaps of a phrase rule do not cross (nor ". " within a line: see phrase). A
 * phrase the one-line version of which is flagged is flagged however it is broken mid-sentence or
 * dressed up.
 */
export function foldForMatching(text: string): string {
  return unescapeText(text)
    .replace(FILLERS, ' ')
    .replace(HIDDEN_ALL, '')
    .normalize('NFKC')
    .replace(HIDDEN_ALL, '')
    // Combining marks dropped: "i̲g̲n̲o̲r̲e̲" (underlined, struck through, accented letter by letter)
    // still reads as "ignore". The phrase rules are English: no word they look for needs a mark.
    .normalize('NFD')
    .replace(MARKS, '')
    .replace(LOOKALIKES, (c) => LOOKALIKE[c])
    .replace(/\s+/g, (ws: string, at: number, s: string) => (LINE_BREAK.test(ws) && SENTENCE_END.test(s.slice(Math.max(0, at - 8), at)) ? '\n' : ' '));
}

// One character of a phrase rule's gap: anything but a sentence end, i.e. a line break kept by
// foldForMatching, or [.!?;] followed by a space ("e.g. " ends one too, which only makes a match
// less likely). A dot inside a word or an address ("evil.example") is no end.
const GAP = '(?:[^\\n.!?;]|[.!?;](?! ))';

/**
 * A phrase rule whose gaps (written `.{0,N}`) do not cross a sentence end: "labels to ignore.⏎
 * Any messages with these labels are skipped." is two sentences, not "ignore … any messages".
 * Each character of a gap is one of two disjoint alternatives, so a gap does not backtrack more
 * than `.` did.
 */
function phrase(re: RegExp): RegExp {
  return new RegExp(re.source.replaceAll('.{0,', `${GAP}{0,`), re.flags);
}

const INSTRUCTIONS: RegExp[] = [
  /\b(ignore|disregard|forget|override)\b.{0,40}\b(previous|prior|above|earlier|all|any|other|system)\b.{0,20}\b(instructions?|prompts?|messages?|rules?|guidelines?)/i,
  /\bbefore (calling|using|invoking|running|executing) (this|any|the|other)\b.{0,80}\b(send|read|call|include|pass|provide|fetch|upload|append|add)\b/i,
  /\b(do not|don['’]?t|never)\b.{0,20}\b(tell|mention|inform|reveal|show|notify|alert)\b.{0,20}\b(the )?(user|human|operator)\b/i,
  /\b(you|the (assistant|model|ai|agent)) (must|should|shall|have to|need to) (always|first|also|secretly|silently)\b/i,
  /\b(system prompt|developer message|jailbreak)\b/i,
  /\binstead of (the user|what the user)\b/i,
].map(phrase);

/**
 * What server instructions are flagged for (TextOptions.instructions): they are text addressed
 * to the model by design ("You must first call get_me…", "Before using any other tool, call
 * list_projects to read the project id", "You should always cite sources"), so the two rules
 * that flag only that (INSTRUCTIONS[1], "before calling this… read/call", and INSTRUCTIONS[3],
 * "you must always/first") are not read. What is hostile whoever it addresses stays: overriding
 * the client's instructions, hiding from the user, acting instead of the user, reaching for the
 * system prompt; and markup, hidden characters, secret access and exfiltration, as everywhere.
 */
const SERVER_INSTRUCTIONS: RegExp[] = [INSTRUCTIONS[0]!, INSTRUCTIONS[2]!, INSTRUCTIONS[4]!, INSTRUCTIONS[5]!];

/**
 * What a name (read as words) is flagged for: only phrases that tell the model what to do. A
 * name that merely mentions a system prompt, a jailbreak or all messages is a noun (a
 * `system_prompt` parameter of a model-calling tool, a `forget_all_messages` tool of a chat
 * memory), and flagging it would hide such tools under `policy.poisoning: "block"`.
 */
const NAME_INSTRUCTIONS: RegExp[] = [
  phrase(/\b(ignore|disregard|override)\b.{0,20}\b(previous|prior|above|earlier)\b.{0,20}\b(instructions?|prompts?|rules?|guidelines?)/i),
  INSTRUCTIONS[1]!,
  INSTRUCTIONS[2]!,
  INSTRUCTIONS[3]!,
];

const MARKUP: RegExp[] = [
  /<\s*\/?\s*(important|system|instructions?|admin|critical|secret|hidden|prompt|assistant)\b[^>]{0,80}>/i,
  /\[\/?(INST|SYS|SYSTEM)\]/,
  /<\|(im_start|im_end|system|user|assistant|endoftext)\|>/i,
  /<<\s*SYS\s*>>/,
];

const SECRETS =
  /(~\/\.ssh|\bid_(rsa|ed25519|ecdsa)\b|\.aws\/credentials|\.env\b|\.npmrc|\.netrc|\.pgpass|\.kube\/config|\.docker\/config\.json|mcp\.json|claude_desktop_config|\b(api[_ -]?keys?|access[_ -]?tokens?|secret[_ -]?keys?|private[_ -]?keys?|passwords?|credentials|session[_ -]?cookies?)\b)/i;
const READ_VERB = /\b(read|cat|open|load|include|send|pass|provide|attach|upload|copy|collect|extract|leak)\b/i;

// Descriptions come from upstreams, so these must not rescan a long run from each place in
// it: an e-mail address starts where its run does and is bounded as RFC 5321 bounds it (64
// before the @, 63 per label), and a URL is taken whole, up to 2 KB (a lookahead and a
// backreference: no backtracking into it). Before, 16 KB of "send.to." took 5.7 s, and 20 KB
// of "https://" 1.2 s.
const EXFIL: RegExp[] = [
  /\b(send|post|upload|forward|transmit|exfiltrat\w*|copy|mail|email|report)\b.{0,80}\b(to|at|into)\b.{0,60}(https?:\/\/|(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}\.[\w.]+|\bwebhook\b|\bpastebin\b|\bremote (server|host|endpoint)\b)/i,
  /\bhttps?:\/\/(?=([^\s"')]{1,2048}))\1.{0,40}\b(with|containing|including)\b.{0,40}\b(contents?|data|conversation|history|secrets?|keys?|tokens?)\b/i,
].map(phrase);

// A run of whitespace that pushes the text after it out of view (of a client that shows the
// first lines of a description, or one line): a model reads on, the user does not. Ordinary
// text has a few blank lines at most, and indents of a few dozen spaces.
const PADDING_CHARS = 100;
const PADDING_LINES = 10;

/** The first run of whitespace that hides the text after it, or undefined. */
function padding(text: string): { index: number; length: number; lines: number } | undefined {
  // Braille blanks (U+2800) show as spaces too. Runs are taken whole (no backtracking into one).
  for (const m of text.matchAll(/[\s\u2800]+/g)) {
    if (m[0].length < 10 || m.index + m[0].length === text.length) continue;
    const lines = m[0].match(/[\n\r\v\f\u0085\u2028\u2029]/g)?.length ?? 0;
    if (m[0].length >= PADDING_CHARS || lines >= PADDING_LINES) return { index: m.index, length: m[0].length, lines };
  }
  return undefined;
}

/** What a flag quotes of the text: the match, on one line, at most 80 characters. */
function quote(m: RegExpExecArray): string {
  const t = m[0].trim().replace(/\n/g, ' ');
  return JSON.stringify(t.length > 80 ? `${t.slice(0, 79)}…` : t);
}

function firstMatch(res: RegExp[], text: string): RegExpExecArray | null {
  for (const re of res) {
    const m = re.exec(text);
    if (m) return m;
  }
  return null;
}

export interface TextOptions extends PoisonOptions {
  /**
   * A name (of a tool, prompt, resource, argument or schema property) rather than prose: not read
   * for `secret-access`, which flags "read"/"copy" near "password"/"token" and so would flag a
   * property named `password` or a tool named `read-password`; and its underscores and camelCase
   * read as spaces by the instruction rules (only: `send_to_webhook` is no exfiltration).
   */
  name?: boolean;
  /**
   * Server instructions (src/catalog/instructions.ts): text addressed to the model by design,
   * read with SERVER_INSTRUCTIONS for `model-instructions`, with a longer default length limit.
   */
  instructions?: boolean;
}

/**
 * The flags of one piece of text. The phrase rules read it folded (foldForMatching) and quote
 * what they matched, as folded; `hidden-unicode` gives the code point and its index in the text
 * as given.
 */
export function checkText(text: string, field: string, opts: TextOptions = {}): PoisonFlag[] {
  const flags: PoisonFlag[] = [];
  const max = opts.maxLength ?? (opts.instructions ? INSTRUCTIONS_LENGTH_FACTOR : 1) * DEFAULT_MAX_DESCRIPTION;
  if (text.length > max) flags.push({ code: 'extreme-length', field, message: `${text.length} characters (limit ${max})` });
  // Bound the work on very long text: the start is where instructions usually hide, the
  // hidden-character scan covers it all. Text within its length limit is read whole.
  const hidden = firstHidden(text);
  if (hidden) flags.push({ code: 'hidden-unicode', field, message: `invisible character U+${hidden.cp.toString(16).toUpperCase().padStart(4, '0')} at ${hidden.index}` });
  const pad = padding(text);
  if (pad) flags.push({ code: 'padding', field, message: `text after ${counted(pad.length, 'whitespace character')} (${counted(pad.lines, 'line break')}) at ${pad.index}` });
  const read = Math.max(20_000, max);
  const head = text.length > read ? text.slice(0, read) : text;
  const normal = foldForMatching(head);
  // A name spells its words with underscores or in camelCase: "ignore_previous_instructions".
  // Read so for instructions only: "send_to_webhook" names a tool, not an exfiltration.
  const words = opts.name ? normal.replace(/_+/g, ' ').replace(/(\p{Ll})(\p{Lu})/gu, '$1 $2') : normal;
  let m = firstMatch(opts.name ? NAME_INSTRUCTIONS : opts.instructions ? SERVER_INSTRUCTIONS : INSTRUCTIONS, words);
  if (m) flags.push({ code: 'model-instructions', field, message: `text addressed to the model: ${quote(m)}` });
  m = firstMatch(MARKUP, normal);
  if (m) flags.push({ code: 'markup', field, message: `prompt-style markup: ${quote(m)}` });
  if (!opts.name) {
    const secret = SECRETS.exec(normal);
    if (secret && READ_VERB.test(normal)) flags.push({ code: 'secret-access', field, message: `asks for secrets or credential files: ${quote(secret)}` });
  }
  m = firstMatch(EXFIL, normal);
  if (m) flags.push({ code: 'exfiltration', field, message: `asks to send data elsewhere: ${quote(m)}` });
  return flags;
}

/**
 * How far into a schema its texts are read. Schemas are bounded before this (src/policy/
 * schema-bounds.ts: depth 48, 20,000 nodes), so these only guard against a schema nobody
 * bounded; a schema past them is flagged rather than passed unread. A bounded schema has at most
 * 20,000 values (each one text at most) and as many names.
 */
const MAX_SCHEMA_DEPTH = 64;
const MAX_SCHEMA_TEXTS = 40_000;

type Texts = { field: string; text: string; name?: boolean }[] & { unread?: string };

// Keywords whose value maps names (of properties, definitions) to schemas: the names are read as
// names, the values as schemas.
const NAMED_SCHEMAS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);
// The keywords of JSON Schema (2020-12 and draft-07) and OpenAPI's few: a key that is none of these
// is a name or text of the upstream's own ("x-note", a key written as a sentence), read as a name.
const KEYWORDS = new Set([
  '$schema', '$id', '$ref', '$anchor', '$dynamicRef', '$dynamicAnchor', '$vocabulary', '$comment', '$defs', 'definitions', '$recursiveRef', '$recursiveAnchor',
  'type', 'enum', 'const', 'title', 'description', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly', 'format', 'nullable',
  'multipleOf', 'maximum', 'exclusiveMaximum', 'minimum', 'exclusiveMinimum', 'maxLength', 'minLength', 'pattern',
  'maxItems', 'minItems', 'uniqueItems', 'maxContains', 'minContains', 'items', 'prefixItems', 'additionalItems', 'contains', 'unevaluatedItems',
  'maxProperties', 'minProperties', 'required', 'dependentRequired', 'dependencies', 'properties', 'patternProperties', 'additionalProperties',
  'propertyNames', 'unevaluatedProperties', 'dependentSchemas', 'allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else',
  'contentEncoding', 'contentMediaType', 'contentSchema',
]);
const TYPE_NAMES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);

/**
 * The strings inside a JSON Schema, which a client hands its model with the schema: every string
 * value (descriptions, titles, `$comment`, an upstream's own `x-…` keys, patterns; defaults,
 * consts, enums and examples, inside arrays too; only a `type`'s type names are left out), read as
 * text; and the names in it (of properties and definitions, `required` entries, keys that are no
 * keyword), read as names.
 */
function schemaTexts(schema: unknown, path: string, out: Texts, depth: number, values = false): void {
  if (schema === null || typeof schema !== 'object') {
    if (typeof schema === 'string') push(out, path, schema);
    return;
  }
  if (depth > MAX_SCHEMA_DEPTH || out.length >= MAX_SCHEMA_TEXTS) {
    out.unread ??= path;
    return;
  }
  if (Array.isArray(schema)) {
    schema.forEach((s, i) => schemaTexts(s, `${path}[${i}]`, out, depth + 1, values));
    return;
  }
  for (const [k, v] of Object.entries(schema as Record<string, unknown>)) {
    // Data, not schema: every string in it is text a model reads.
    if (values || k === 'default' || k === 'examples' || k === 'const' || k === 'enum') {
      if (values) push(out, `${path}.${k} (name)`, k, true);
      schemaTexts(v, `${path}.${k}`, out, depth + 1, true);
      continue;
    }
    if (!KEYWORDS.has(k)) push(out, `${path}.${k} (name)`, k, true);
    if (k === 'type' && (typeof v === 'string' ? TYPE_NAMES.has(v) : Array.isArray(v) && v.every((t) => typeof t === 'string' && TYPE_NAMES.has(t)))) continue;
    if (k === 'required' && Array.isArray(v)) {
      v.forEach((n, i) => (typeof n === 'string' ? push(out, `${path}.required[${i}]`, n, true) : schemaTexts(n, `${path}.required[${i}]`, out, depth + 1)));
    } else if (NAMED_SCHEMAS.has(k) && v !== null && typeof v === 'object' && !Array.isArray(v)) {
      for (const [name, sub] of Object.entries(v)) {
        push(out, `${path}.${k}.${name} (name)`, name, true);
        schemaTexts(sub, `${path}.${k}.${name}`, out, depth + 2);
      }
    } else schemaTexts(v, `${path}.${k}`, out, depth + 1);
  }
}

function push(out: Texts, field: string, text: string, name?: boolean): void {
  if (out.length >= MAX_SCHEMA_TEXTS) out.unread ??= field;
  else out.push(name ? { field, text, name } : { field, text });
}

/** A field beyond those a model is meant to read, passed on as given: its key a name, its strings data. */
function otherField(out: Texts, path: string, key: string, value: unknown): void {
  push(out, `${path} (name)`, key, true);
  schemaTexts(value, path, out, 0, true);
}

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

const ARGUMENT_READ = new Set(['name', 'title', 'description', 'required']);

/** Fields checkItem reads as it reads each (icons: icons.ts screens where they point). */
const READ_ABOVE = new Set(['name', 'uri', 'uriTemplate', 'description', 'title', 'annotations', 'inputSchema', 'outputSchema', 'arguments', '_meta', 'icons']);

/**
 * Every flag of a listed item (tool, prompt, resource, template): its name, title and
 * description, its schemas' texts and property names, its prompt arguments' names, titles and
 * descriptions, the strings and keys of its `_meta` and its other fields. Names are read as names (TextOptions.name).
 */
export function checkItem(item: Record<string, unknown>, opts: PoisonOptions = {}): PoisonFlag[] {
  const texts: Texts = [];
  // What goes downstream as given beyond the fields a model is meant to read: read as _meta is.
  const meta: Texts = [];
  if (typeof item.name === 'string') texts.push({ field: 'name', text: item.name, name: true });
  // A resource's address is listed with it, hub and clients pass it as it is: read as a name.
  for (const k of ['uri', 'uriTemplate'] as const) if (typeof item[k] === 'string') texts.push({ field: k, text: item[k] as string, name: true });
  // Read as data when not a string: a client that does not check the shape shows an object or an
  // array as it is.
  for (const k of ['description', 'title'] as const) schemaTexts(item[k], k, texts, 0, true);
  const ann = item.annotations as Record<string, unknown> | undefined;
  if (ann) {
    schemaTexts(ann.title, 'annotations.title', texts, 0, true);
    // A resource's annotations, and a trusted server's tool's, pass as given, keys and all.
    if (isMap(ann)) for (const [k, v] of Object.entries(ann)) if (k !== 'title') otherField(meta, `annotations.${k}`, k, v);
  }
  schemaTexts(item.inputSchema, 'inputSchema', texts, 0);
  schemaTexts(item.outputSchema, 'outputSchema', texts, 0);
  if (Array.isArray(item.arguments)) {
    // Bounded as a schema's texts are: nothing bounds how many arguments a prompt lists (300,000
    // names, 5.6 MB, held the event loop 1.7 s per changed list), and past the bound the item is
    // flagged unread.
    for (let i = 0; i < item.arguments.length && texts.unread === undefined; i++) {
      const a: unknown = item.arguments[i];
      if (a === null || typeof a !== 'object') continue;
      const arg = a as Record<string, unknown>;
      if (typeof arg.name === 'string') push(texts, `arguments[${i}].name`, arg.name, true);
      for (const k of ['title', 'description'] as const) schemaTexts(arg[k], `arguments[${i}].${k}`, texts, 0, true);
      for (const [k, v] of Object.entries(arg)) if (!ARGUMENT_READ.has(k)) otherField(meta, `arguments[${i}].${k}`, k, v);
    }
  }
  const flags: PoisonFlag[] = [];
  for (const t of texts) flags.push(...checkText(t.text, t.field, t.name ? { ...opts, name: true } : opts));
  if (texts.unread) flags.push({ code: 'extreme-length', field: texts.unread, message: `its schemas or arguments are too deep or have too many texts to check (from ${texts.unread} on)` });
  // `_meta` goes downstream as the upstream gave it (unknown keys pass unchanged), and some
  // clients hand parts of it to the model (a widget's description): every string in it, and its
  // keys, are read as data, as a schema's values are. Not for length: nothing bounds what a
  // server keeps there (a content security policy, an embedded icon), and a long value is no sign.
  schemaTexts(item._meta, '_meta', meta, 0, true);
  // So are the item's other fields (a tool's `execution`, a key the protocol does not have),
  // which go downstream as given too: an instruction under `execution.note` or `x-note` reaches
  // a client that shows the whole item as surely as one in its description.
  for (const k of Object.keys(item)) {
    if (!READ_ABOVE.has(k)) otherField(meta, k, k, item[k]);
  }
  for (const t of meta) flags.push(...checkText(t.text, t.field, t.name ? { ...opts, name: true } : opts).filter((f) => f.code !== 'extreme-length'));
  if (meta.unread) flags.push({ code: 'extreme-length', field: meta.unread, message: `${/^[^.[ ]*/.exec(meta.unread)![0]} is too deep or has too many texts to check (from ${meta.unread} on)` });
  return flags;
}
