import { PatternBudgetError, RegexSandbox } from './regex-sandbox.js';

/**
 * Pattern safety for JSON Schema `pattern` / `patternProperties` (ajv's `code.regExp` hook).
 *
 *  - reject: nested unbounded repetition (`(a+)+`, `(\w+\s?)*`) and backreferences, the
 *    shapes of catastrophic backtracking: the schema is refused and its tool quarantined.
 *  - sandbox: shapes that can still be polynomial or ambiguous (several unbounded
 *    quantifiers, repeated alternation, lookarounds): run in a worker under a time budget.
 *  - native: at most one unbounded quantifier and nothing above; run in-process, but only on
 *    short strings (a scan for an unanchored match is quadratic in the input), longer ones
 *    go through the sandbox too.
 */
export type PatternClass = { kind: 'native' } | { kind: 'sandbox'; why: string } | { kind: 'reject'; why: string };

/** Longest string a native pattern check runs on in-process. */
export const NATIVE_INPUT_MAX = 4096;
/** A bounded repeat above this many counts as unbounded (`{1,1000}` backtracks like `+`). */
const BIG_REPEAT = 16;
/**
 * Nested bounded repeats whose counts multiply past this go to the sandbox: `(a{1,16}){1,16}`
 * backtracks through 16^16 ways on a near miss (seconds at 27 characters), while
 * `(\d{1,3}\.){3}` (3 × 3) is harmless and stays native.
 */
const NESTED_PRODUCT = 64;

export class HostilePatternError extends Error {
  override readonly name = 'HostilePatternError';
  constructor(readonly why: string) {
    super(why);
  }
}

interface Frame {
  /** Some quantifier inside repeats more than BIG_REPEAT times (or without bound). */
  repeats: boolean;
  /** The largest repeat count inside, nested counts multiplied (1: nothing repeats). */
  inner: number;
  alt: boolean;
  /** The raw text of each alternative, for the literal-prefix check. */
  branches: string[];
  /** Where the current alternative of this group began. */
  branchStart: number;
}

/** Reads `{n}`, `{n,}`, `{n,m}` at i; undefined when the brace is a literal. */
function braceQuantifier(p: string, i: number): { max: number; end: number } | undefined {
  const m = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(i, i + 24));
  if (!m) return undefined;
  const max = m[2] === undefined ? Number(m[1]) : m[3] === '' ? Infinity : Number(m[3]);
  return { max, end: i + m[0].length };
}

/** Plain literal alternatives where none is a prefix of another match unambiguously. */
function unambiguousLiterals(branches: string[]): boolean {
  if (!branches.every((b) => b.length > 0 && !/[\\[\](){}.*+?^$|]/.test(b))) return false;
  for (let a = 0; a < branches.length; a++)
    for (let b = 0; b < branches.length; b++) if (a !== b && branches[b].startsWith(branches[a])) return false;
  return true;
}

export function classifyPattern(p: string): PatternClass {
  const stack: Frame[] = [{ repeats: false, inner: 1, alt: false, branches: [], branchStart: 0 }];
  let nestedBounded = false;
  let unbounded = 0;
  let lookaround = false;
  let repeatedAlt = false;
  // What the next quantifier applies to: a group's summary, or a plain atom.
  let last: { group?: Frame } | undefined;
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    const top = stack[stack.length - 1];
    if (c === '\\') {
      const n = p[i + 1];
      if (n !== undefined && (/[1-9]/.test(n) || (n === 'k' && p[i + 2] === '<'))) return { kind: 'reject', why: 'backreference' };
      i++;
      last = {};
      continue;
    }
    if (c === '[') {
      let j = i + 1;
      if (p[j] === '^') j++;
      // In JavaScript a "]" right after "[" or "[^" closes the class (`[]` matches nothing,
      // `[^]` anything); read as a literal, as other dialects do, it hid the rest of the
      // pattern from this reader: `[^](a+)+$` passed as native.
      while (j < p.length && p[j] !== ']') j += p[j] === '\\' ? 2 : 1;
      i = j;
      last = {};
      continue;
    }
    if (c === '(') {
      if (p.startsWith('(?=', i) || p.startsWith('(?!', i) || p.startsWith('(?<=', i) || p.startsWith('(?<!', i)) lookaround = true;
      let skip = 0;
      if (p[i + 1] === '?') {
        const named = /^\(\?<([A-Za-z_$][\w$]*)>/.exec(p.slice(i, i + 64));
        skip = named ? named[0].length - 1 : p[i + 2] === '<' ? 3 : 2;
      }
      i += skip;
      stack.push({ repeats: false, inner: 1, alt: false, branches: [], branchStart: i + 1 });
      last = undefined;
      continue;
    }
    if (c === ')') {
      if (stack.length === 1) return { kind: 'reject', why: 'unbalanced parenthesis' };
      const g = stack.pop()!;
      g.branches.push(p.slice(g.branchStart, i));
      const parent = stack[stack.length - 1];
      if (g.repeats) parent.repeats = true;
      parent.inner = Math.max(parent.inner, g.inner);
      last = { group: g };
      continue;
    }
    if (c === '|') {
      top.alt = true;
      top.branches.push(p.slice(top.branchStart, i));
      top.branchStart = i + 1;
      last = undefined;
      continue;
    }
    let max: number | undefined;
    let end = i;
    if (c === '*' || c === '+') max = Infinity;
    else if (c === '?') max = 1;
    else if (c === '{') {
      const q = braceQuantifier(p, i);
      if (q) {
        max = q.max;
        end = q.end - 1;
      }
    }
    if (max === undefined) {
      last = c === '^' || c === '$' ? undefined : {};
      continue;
    }
    if (p[end + 1] === '?') end++; // lazy: same backtracking shape
    const inner = last?.group ? last.group.inner : 1;
    if (max > 1) {
      if (inner > 1 && max * inner > NESTED_PRODUCT) nestedBounded = true;
      top.inner = Math.max(top.inner, max * inner);
    }
    const big = max > BIG_REPEAT;
    if (big) {
      unbounded++;
      top.repeats = true;
      if (last?.group?.repeats) return { kind: 'reject', why: 'nested repetition (a repeated group that itself repeats)' };
      if (last?.group?.alt && !unambiguousLiterals(last.group.branches)) repeatedAlt = true;
    }
    i = end;
    last = undefined;
  }
  if (stack.length !== 1) return { kind: 'reject', why: 'unbalanced parenthesis' };
  if (repeatedAlt) return { kind: 'sandbox', why: 'repeated alternation' };
  if (nestedBounded) return { kind: 'sandbox', why: 'nested repetition' };
  if (lookaround) return { kind: 'sandbox', why: 'lookaround' };
  if (unbounded > 1) return { kind: 'sandbox', why: 'several unbounded quantifiers' };
  return { kind: 'native' };
}

/** What Unicode mode lets a backslash escape as itself (`-` too, but only in a class). */
const SYNTAX_CHARACTERS = new Set('^$\\.*+?()[]{}|/');

/**
 * A pattern whose escaped punctuation Unicode mode refuses (`\-` outside a class, `\_`, `\'`,
 * `\#`: ECMA-262 without `u` reads each as the character itself, and so does every other
 * dialect servers write patterns in) with each such escape spelt `\u{…}`, which means that
 * character in and out of classes alike. ajv asks for Unicode mode, and `^\d{3}\-\d{4}$`
 * quarantined its tool. Letter escapes are left alone: `\Z` or `(?P<n>…)` (Python's) are no
 * ECMA-262 and still fail.
 */
export function withUnicodeEscapes(pattern: string): string {
  return pattern.replace(/\\(.)/gsu, (m, c: string) =>
    /[A-Za-z0-9]/.test(c) || SYNTAX_CHARACTERS.has(c) ? m : `\\u{${c.codePointAt(0)!.toString(16)}}`,
  );
}

/** ajv's RegExpEngine: `(pattern, flags) → {test}`, plus `code` (used only for standalone code). */
export interface SafeRegExpEngine {
  (pattern: string, flags: string): { test(s: string): boolean; toString(): string };
  code: string;
  /**
   * Every sandboxed pattern check until `end()` shares one budget of `totalMs` (a native check
   * of a short string is linear and quick, and reads no clock): a value of many strings, each
   * just under the budget of one check, would otherwise hold the hub's thread (checks are
   * synchronous) for as long as its sender likes. Past it, a check throws PatternBudgetError
   * (`shared`). One value at a time: validation is synchronous.
   */
  begin(totalMs: number): void;
  end(): void;
}

/** Builds ajv's `code.regExp` engine over one sandbox (shared by every compiled schema). */
export function safeRegExpEngine(sandbox: RegexSandbox): SafeRegExpEngine {
  let deadline = Infinity;
  let total = 0;
  const engine = ((pattern: string, flags: string) => {
    const cls = classifyPattern(pattern);
    if (cls.kind === 'reject') throw new HostilePatternError(`pattern ${JSON.stringify(pattern.slice(0, 80))} is refused: ${cls.why} can backtrack catastrophically`);
    let source = pattern;
    let re: RegExp;
    try {
      re = new RegExp(source, flags);
    } catch (err) {
      if (!flags.includes('u')) throw err;
      source = withUnicodeEscapes(pattern);
      re = new RegExp(source, flags); // throws on a syntax error, failing the compile
    }
    const key = `/${pattern}/${flags}`;
    return {
      test(s: string): boolean {
        // Linear and short: no budget to keep, and no clock to read on the common path.
        if (cls.kind === 'native' && s.length <= NATIVE_INPUT_MAX) return re.test(s);
        const left = deadline - performance.now();
        if (left <= 0) throw new PatternBudgetError(pattern, total, s.length, true);
        if (left >= sandbox.budgetMs) return sandbox.test(source, flags, s);
        try {
          return sandbox.test(source, flags, s, Math.max(1, Math.floor(left)));
        } catch (err) {
          // What ran out was the value's budget, not this pattern's own.
          throw err instanceof PatternBudgetError ? new PatternBudgetError(pattern, total, s.length, true) : err;
        }
      },
      // ajv deduplicates compiled patterns by this string.
      toString: () => key,
    };
  }) as SafeRegExpEngine;
  engine.code = 'safeRegExp';
  engine.begin = (totalMs) => {
    total = totalMs;
    deadline = performance.now() + totalMs;
  };
  engine.end = () => {
    deadline = Infinity;
  };
  return engine;
}
