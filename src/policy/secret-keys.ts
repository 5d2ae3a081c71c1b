/*
 * Which object keys hold credentials, as words of the key: the ledger blanks their values in
 * stored bodies (src/ledger/redact.ts), and an upstream's error data and relayed log data blank
 * them before a client or the ledger sees them (src/policy/secret-text.ts).
 */

/** A case-insensitive spelling of a word, in a pattern matched case-sensitively. */
const anyCase = (w: string): string => w.replace(/[a-z]/g, (c) => `[${c}${c.toUpperCase()}]`);

/**
 * The ends of a word within a key, which is split at `_`, `-`, `.`, anything not a letter, and
 * changes of case (`accessToken`, `APIKey`): written as `word`, `Word` or `WORD`, followed by no
 * lower-case letter, and an upper-case one only where it starts a word of its own (`TOKENValue`).
 */
const endsWord = (w: string): string => {
  const cap = w[0]!.toUpperCase() + w.slice(1);
  return `(?:(?:${w}|${cap})(?![a-z])|${w.toUpperCase()}(?![a-z])(?![A-Z](?![a-z])))`;
};

/**
 * Default pattern of object keys whose values never reach the ledger (nor a confirmation's
 * summary): credential words, as words of a key rather than anywhere in it, so that `max_tokens`,
 * `passage` or `bypass_cache` keep their values. Long words are found anywhere, in any case, as
 * no other word holds them (`dbpassword`, `clientSecret`, `x-api-key`, `privateKey`, `cookies`);
 * `token` ends a word (`token`, `accessToken`, `csrftoken`, `GITHUB_TOKEN`; not `tokens`,
 * `tokenizer`); `pass` ends a word too (`pass`, `db_pass`, `smtpPass`), but not the English
 * words that end so (`bypass`, `compass`, `overpass`…). Matched case-sensitively, to see a word
 * start at a capital; a `ledger.redactKeys` of the config replaces it (matched case-insensitively).
 */
export const DEFAULT_REDACT_KEYS = new RegExp(
  [
    ...['passw(?:or)?d', 'passphrase', 'secret', 'credential', 'authorization', 'cookie'].map((w) => anyCase(w)),
    ...[['api', 'key'], ['private', 'key']].map((ws) => ws.map(anyCase).join('[-_. ]?')),
    endsWord('token'),
    `(?<!${['by', 'com', 'over', 'under', 'tres', 'sur'].map(anyCase).join('|')})${endsWord('pass')}`,
  ].join('|'),
);
