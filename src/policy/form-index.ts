/**
 * Which of many strings (the forms of the config's secrets, config-secrets.ts) occur in a text,
 * found in one pass over the text whatever their number. Every log line, error and ledger
 * string is searched for them: a substring search per form cost time in the number of forms
 * times the text's length, and each secret has up to a dozen forms (plain, encoded, base64 at
 * three offsets): with 100 secrets configured a 200-character log line took about 10 µs and a
 * 10 KB ledger string 50 to 200 µs (a result of a thousand strings, 10 ms), where this pass
 * takes well under 1 µs and a few µs. Here (Wu and Manber's multi-pattern search) the text is read a window (the
 * shortest form's length) at a time, by the BLOCK characters that end it: a block no form has
 * among its first `window` characters moves the window on by all but BLOCK - 1 of them, and only
 * where the block could end a form's first `window` characters is the window's hash looked up
 * and a form compared.
 * A few forms are searched for directly, which is as fast for them.
 */

/** The most characters of a form the search knows it by (the window: the shortest form's length, at most this). */
const MAX_WINDOW = 32;
/** Up to this many forms, a substring search for each is as cheap. */
const DIRECT = 24;
/** The shift table's size (bytes): triples of characters hashed into it, few of them colliding. */
const BLOCKS = 1 << 17;
const BLOCK_BITS = 17;
const BLOCK = 3;
const BASE = 31;

function hashAt(s: string, at: number, window: number): number {
  let h = 0;
  for (let i = at; i < at + window; i++) h = (Math.imul(h, BASE) + s.charCodeAt(i)) | 0;
  return h;
}

/** The BLOCK characters ending at `at`, as an index into the shift table. */
function blockAt(s: string, at: number): number {
  const h = Math.imul(Math.imul(s.charCodeAt(at - 2), 0x9e3779b1) ^ Math.imul(s.charCodeAt(at - 1), 0x85ebca6b) ^ s.charCodeAt(at), 0xc2b2ae35);
  return h >>> (32 - BLOCK_BITS);
}

export class FormIndex {
  /** The forms by the hash of their first `window` characters (undefined: each searched directly). */
  private readonly byHash: Map<number, string[]> | undefined;
  /** How far the window may move on when it ends with a block: window - BLOCK + 1 for a block no form has. */
  private readonly shift: Uint8Array | undefined;
  /** How many characters of each form are hashed and skipped over: the shortest form's length, at most MAX_WINDOW. */
  private readonly window: number = 0;

  /** `forms`: longest first (a form inside another is replaced after it). */
  constructor(readonly forms: readonly string[]) {
    if (forms.length <= DIRECT) return;
    const window = (this.window = Math.min(MAX_WINDOW, ...forms.map((f) => f.length)));
    if (window < BLOCK) return;
    this.byHash = new Map();
    const shift = (this.shift = new Uint8Array(BLOCKS).fill(window - BLOCK + 1));
    for (const f of forms) {
      const h = hashAt(f, 0, window);
      const same = this.byHash.get(h);
      if (same) same.push(f);
      else this.byHash.set(h, [f]);
      for (let j = BLOCK - 1; j < window; j++) {
        const b = blockAt(f, j);
        shift[b] = Math.min(shift[b], window - 1 - j);
      }
    }
  }

  /** The forms that occur in `text`, longest first (as `forms` has them). */
  present(text: string): readonly string[] {
    const byHash = this.byHash;
    const { shift, window } = this;
    if (byHash === undefined || shift === undefined) return this.forms.filter((f) => text.includes(f));
    let found: Set<string> | undefined;
    // `end`: the last character of the window.
    for (let end = window - 1; end < text.length; ) {
      const s = shift[blockAt(text, end)];
      if (s > 0) {
        end += s;
        continue;
      }
      const start = end - window + 1;
      const same = byHash.get(hashAt(text, start, window));
      if (same !== undefined) for (const f of same) if (text.startsWith(f, start)) (found ??= new Set()).add(f);
      end += 1;
    }
    if (found === undefined) return [];
    const got = found;
    return this.forms.filter((f) => got.has(f));
  }
}
