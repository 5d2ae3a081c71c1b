/**
 * A request's JSON-RPC id in the audit row's request_id (text). Ids of different types are
 * different requests (the number 1 and the string "1"), which String(id) made one: `ledger query
 * --request-id 1` listed both, and nothing told them apart. Stored now as: a number as its
 * digits (as it always was); a string as itself (as it always was), unless it would read as a
 * number or starts with a quote, then as its JSON form (`"1"`, with the quotes). So every row
 * of a string id that is no number keeps its text, and one text is one id. Rows written before
 * hold a string id of digits as bare digits: read as the number.
 */

/** JSON's number grammar: what String(n) writes for a number id, and what a string must not look like bare. */
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** The stored text of a request's id (an id the JSON-RPC message had no valid form of: String of it, as before). */
export function requestIdText(id: unknown): string {
  if (typeof id === 'string') return JSON_NUMBER.test(id) || id.startsWith('"') ? JSON.stringify(id) : id;
  return String(id);
}

/** An id's type and its own text (a string's without the quotes it may be stored with), from the stored text. */
export function requestIdOf(stored: string): { type: 'number' | 'string'; text: string } {
  if (JSON_NUMBER.test(stored)) return { type: 'number', text: stored };
  if (stored.startsWith('"')) {
    try {
      const s = JSON.parse(stored) as unknown;
      if (typeof s === 'string') return { type: 'string', text: s };
    } catch {
      // Not one this hub stored: the text as it is.
    }
  }
  return { type: 'string', text: stored };
}

/**
 * What `--request-id` (and /admin/ledger's `requestId`) selects, as stored: the value read as the
 * id's JSON form when it is one (`1` the number, `'"1"'` the string), else as a string (`abc`).
 * `what`: the id in words. `other`: for a number, or a string of a number's text, the id of the
 * other type, whose rows are told of, not listed, and the option value that lists them.
 */
export function requestIdQuery(value: string): { stored: string; what: string; other?: { stored: string; what: string; option: string } } {
  // As the hub stored it: the number's String() (`1.0` is 1).
  if (JSON_NUMBER.test(value)) {
    const n = String(JSON.parse(value));
    return { stored: n, what: `the number ${n}`, other: { stored: JSON.stringify(value), what: `the string ${JSON.stringify(value)}`, option: `'${JSON.stringify(value)}'` } };
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
  const what = `the string ${JSON.stringify(str)}`;
  if (!JSON_NUMBER.test(str)) return { stored: requestIdText(str), what };
  const n = String(JSON.parse(str));
  return { stored: requestIdText(str), what, other: { stored: n, what: `the number ${n}`, option: n } };
}
