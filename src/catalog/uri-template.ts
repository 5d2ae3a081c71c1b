/**
 * Matching a URI against an RFC 6570 template well enough to route it: each `{var}` (and the
 * level-2/3 operators) matches a run of characters; `{+var}`/`{#var}` may span slashes.
 */
export function templateMatcher(template: string): RegExp | null {
  let src = '^';
  let i = 0;
  while (i < template.length) {
    const open = template.indexOf('{', i);
    if (open < 0) {
      src += escape(template.slice(i));
      break;
    }
    src += escape(template.slice(i, open));
    const close = template.indexOf('}', open);
    if (close < 0) return null;
    const expr = template.slice(open + 1, close);
    const op = expr[0];
    if (op === '+' || op === '#') src += '.*';
    else if (op === '?' || op === '&') src += '(?:[?&].*)?';
    else if (op === '/' || op === '.' || op === ';') src += '.*';
    else src += '[^/?#]+';
    i = close + 1;
  }
  try {
    return new RegExp(src + '$');
  } catch {
    return null;
  }
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
