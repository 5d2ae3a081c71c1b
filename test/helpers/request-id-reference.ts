/**
 * `requestIdText` as it was before its common case went without a regular expression (issue #9),
 * kept unchanged as the reference the current one is checked against over generated ids
 * (test/unit/ledger-request-id.test.ts): the same stored text for every id.
 */
import { MAX_TEXT } from '../../src/ledger/columns.js';

const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

const CUT = '…';

export function referenceRequestIdText(id: unknown): string {
  if (id === undefined) return '';
  if (typeof id !== 'string') return String(id);
  // A lone surrogate (valid in a JSON string as `\ud800`) would be stored as U+FFFD (columns.ts):
  // the id "\ud800" as the id "\ufffd". Its JSON form escapes it, and keeps it.
  const stored = id === '' || JSON_NUMBER.test(id) || id.startsWith('"') || !id.isWellFormed() ? JSON.stringify(id) : id;
  return stored.length <= MAX_TEXT ? stored : cutText(id);
}

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
