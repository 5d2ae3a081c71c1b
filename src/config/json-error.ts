/**
 * Where a JSON document JSON.parse refused is broken, said without quoting it (V8's messages
 * can include a slice of the document, and a config may hold a literal secret).
 *
 * Two mistakes get their own words, as they are what a file pasted from an IDE's config
 * holds (VS Code's and Cursor's `mcp.json` are JSONC): a comment and a trailing comma. V8 reads
 * either as a character it did not expect ("Expected double-quoted property name", or, for a
 * comma before `]`, no position at all).
 */
export function jsonErrorWhere(text: string, message: string): string {
  const pos = /at position (\d+)/.exec(message);
  const at = pos ? Number(pos[1]) : undefined;
  const slip = jsoncSlip(text);
  // The first error in the text is the one V8 stopped at: a slip after that position is not it.
  if (slip && (at === undefined || slip.at <= at)) return `${lineColumn(text, slip.at)}: ${slip.what}`;
  const stripped = message.replace(/ in JSON at position \d+.*$/s, '');
  const what = stripped.includes('"') ? 'syntax error' : stripped;
  if (at !== undefined) return `${lineColumn(text, at)}: ${what}`;
  const token = /^Unexpected token '(.)'/.exec(message);
  if (token) return `unexpected character '${token[1]}'`;
  return /end of JSON input/.test(message) ? 'unexpected end of input' : 'syntax error';
}

function lineColumn(text: string, at: number): string {
  const before = text.slice(0, at);
  return `line ${before.split('\n').length} column ${at - before.lastIndexOf('\n')}`;
}

/** The first comment or trailing comma outside a string, if any: where it starts, and what to do. */
function jsoncSlip(text: string): { at: number; what: string } | undefined {
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      // To the string's end: an escape takes the character after it.
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (c === '/' && (text[i + 1] === '/' || text[i + 1] === '*')) {
      return { at: i, what: 'a comment, which JSON does not allow: remove it' };
    } else if (c === ',') {
      let j = i + 1;
      while (j < text.length && ' \t\r\n'.includes(text[j]!)) j++;
      if (text[j] === '}' || text[j] === ']') return { at: i, what: `a trailing comma before '${text[j]}', which JSON does not allow: remove it` };
    }
  }
  return undefined;
}
