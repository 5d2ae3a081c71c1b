/**
 * Signs of tool poisoning in the text a model reads (descriptions, titles, parameter
 * descriptions): instructions aimed at the model, hidden Unicode, prompt markup, requests to
 * read secrets or send data elsewhere, extreme length. Heuristics: a flag is a reason for an
 * operator to look, and `policy.poisoning: "block"` hides flagged items. Used by the bundled
 * `description-checks` plugin.
 */

export type PoisonCode = 'hidden-unicode' | 'model-instructions' | 'markup' | 'secret-access' | 'exfiltration' | 'extreme-length';

export interface PoisonFlag {
  code: PoisonCode;
  /** Where it was found, e.g. "description" or "inputSchema.properties.path.description". */
  field: string;
  message: string;
}

export interface PoisonOptions {
  /** Characters of one text above which it is flagged (default 4000). */
  maxLength?: number;
}

export const DEFAULT_MAX_DESCRIPTION = 4000;

// Zero-width and invisible formatting, bidi embeddings/overrides/isolates, and the Unicode tag
// block (U+E0000–E007F), which can spell out invisible ASCII.
const HIDDEN = /[\u200B-\u200F\u2060-\u2064\u206A-\u206F\uFEFF\u00AD\u180E\u202A-\u202E\u2066-\u2069]|\uDB40[\uDC00-\uDC7F]/;

const INSTRUCTIONS: RegExp[] = [
  /\b(ignore|disregard|forget|override)\b.{0,40}\b(previous|prior|above|earlier|all|any|other|system)\b.{0,20}\b(instructions?|prompts?|messages?|rules?|guidelines?)/i,
  /\bbefore (calling|using|invoking|running|executing) (this|any|the|other)\b.{0,80}\b(send|read|call|include|pass|provide|fetch|upload|append|add)\b/i,
  /\b(do not|don't|never)\b.{0,20}\b(tell|mention|inform|reveal|show|notify|alert)\b.{0,20}\b(the )?(user|human|operator)\b/i,
  /\b(you|the (assistant|model|ai|agent)) (must|should|shall|have to|need to) (always|first|also|secretly|silently)\b/i,
  /\b(system prompt|developer message|jailbreak)\b/i,
  /\binstead of (the user|what the user)\b/i,
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
];

/** The flags of one piece of text. */
export function checkText(text: string, field: string, opts: PoisonOptions = {}): PoisonFlag[] {
  const flags: PoisonFlag[] = [];
  const max = opts.maxLength ?? DEFAULT_MAX_DESCRIPTION;
  if (text.length > max) flags.push({ code: 'extreme-length', field, message: `${text.length} characters (limit ${max})` });
  // Bound the work on very long text: the start is where instructions usually hide, the
  // hidden-character scan covers it all.
  const hidden = HIDDEN.exec(text);
  if (hidden) {
    const cp = hidden[0].codePointAt(0)!;
    flags.push({ code: 'hidden-unicode', field, message: `invisible character U+${cp.toString(16).toUpperCase().padStart(4, '0')} at ${hidden.index}` });
  }
  const head = text.length > 20_000 ? text.slice(0, 20_000) : text;
  const normal = head.replace(new RegExp(HIDDEN.source, 'g'), '');
  if (INSTRUCTIONS.some((re) => re.test(normal))) flags.push({ code: 'model-instructions', field, message: 'text addressed to the model' });
  if (MARKUP.some((re) => re.test(normal))) flags.push({ code: 'markup', field, message: 'prompt-style markup' });
  if (SECRETS.test(normal) && READ_VERB.test(normal)) flags.push({ code: 'secret-access', field, message: 'asks for secrets or credential files' });
  if (EXFIL.some((re) => re.test(normal))) flags.push({ code: 'exfiltration', field, message: 'asks to send data elsewhere' });
  return flags;
}

/**
 * How far into a schema its texts are read. Schemas are bounded before this (src/policy/
 * schema-bounds.ts: depth 48, 20,000 nodes), so these only guard against a schema nobody
 * bounded; a schema past them is flagged rather than passed unread.
 */
const MAX_SCHEMA_DEPTH = 64;
const MAX_SCHEMA_TEXTS = 20_000;

type Texts = { field: string; text: string }[] & { unread?: string };

/** Description-like strings inside a JSON Schema (descriptions, titles; defaults, consts, enums and examples, inside arrays too). */
function schemaTexts(schema: unknown, path: string, out: Texts, depth: number, values = false): void {
  if (schema === null || typeof schema !== 'object') {
    if (values && typeof schema === 'string') push(out, path, schema);
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
    if (values) schemaTexts(v, `${path}.${k}`, out, depth + 1, true);
    else if ((k === 'description' || k === 'title') && typeof v === 'string') push(out, `${path}.${k}`, v);
    // Data, not schema: every string in it is text a model reads.
    else if (k === 'default' || k === 'examples' || k === 'const' || k === 'enum') schemaTexts(v, `${path}.${k}`, out, depth + 1, true);
    else if (typeof v === 'object') schemaTexts(v, `${path}.${k}`, out, depth + 1);
  }
}

function push(out: Texts, field: string, text: string): void {
  if (out.length >= MAX_SCHEMA_TEXTS) out.unread ??= field;
  else out.push({ field, text });
}

/** Every flag of a listed item (tool, prompt, resource): its own texts and its schemas' texts. */
export function checkItem(item: Record<string, unknown>, opts: PoisonOptions = {}): PoisonFlag[] {
  const texts: Texts = [];
  for (const k of ['description', 'title'] as const) if (typeof item[k] === 'string') texts.push({ field: k, text: item[k] as string });
  const ann = item.annotations as Record<string, unknown> | undefined;
  if (ann && typeof ann.title === 'string') texts.push({ field: 'annotations.title', text: ann.title });
  if (typeof item.name === 'string' && HIDDEN.test(item.name)) texts.push({ field: 'name', text: item.name });
  schemaTexts(item.inputSchema, 'inputSchema', texts, 0);
  schemaTexts(item.outputSchema, 'outputSchema', texts, 0);
  if (Array.isArray(item.arguments)) {
    item.arguments.forEach((a, i) => {
      const d = (a as { description?: unknown } | null)?.description;
      if (typeof d === 'string') texts.push({ field: `arguments[${i}].description`, text: d });
    });
  }
  const flags: PoisonFlag[] = [];
  for (const t of texts) flags.push(...checkText(t.text, t.field, opts));
  if (texts.unread) flags.push({ code: 'extreme-length', field: texts.unread, message: `the schema is too deep or has too many texts to check (from ${texts.unread} on)` });
  return flags;
}
