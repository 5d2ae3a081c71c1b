/**
 * Matching a URI against an RFC 6570 template well enough to route it: a simple `{var}` (and
 * `{a,b}`) matches a non-empty run without `/`, `?` or `#`; `{+var}`, `{#var}` and the path,
 * label and parameter operators (`/ . ;`) match any run; `{?var}`/`{&var}` match nothing or a
 * `?` or `&` and the rest.
 *
 * Templates come from upstreams, which may be hostile, and URIs from clients. A regular
 * expression of such a template backtracks polynomially (`{+a}{+b}{+c}{+d}` over 300
 * characters took 2 s, and each more variable multiplies it). Here the template is an
 * automaton run over every place it could be at once, and each set of places met is kept with
 * where each kind of character leads from it (a DFA built as it is used, as RE2 does): a URI
 * costs a table lookup per character once its sets are known. What a matcher keeps is bounded;
 * a template that needs more (none that routes real URIs comes near) stops matching.
 */

/** One step of a template: a character it must read, a run it may read, or a fork. */
type Step =
  | { kind: 'char'; code: number }
  /** A `?` or an `&`: where a query expansion starts. */
  | { kind: 'query' }
  /** Exactly one character of a segment (no `/`, `?` or `#`). */
  | { kind: 'one' }
  /** Any run of the class, empty included. `segment`: no `/`, `?` or `#`; else anything. */
  | { kind: 'run'; segment: boolean }
  /** Goes on at the next step, or skips `skip` steps. */
  | { kind: 'fork'; skip: number };

export interface TemplateMatcher {
  test(uri: string): boolean;
}

function inSegment(code: number): boolean {
  return code !== 0x2f /* / */ && code !== 0x3f /* ? */ && code !== 0x23 /* # */;
}

/** Longer templates are not routed: a new set of places costs work in proportion to the template. */
export const MAX_TEMPLATE_LENGTH = 1024;

function steps(template: string): Step[] | null {
  const out: Step[] = [];
  // Whether the last step is a run that may absorb the next expression's: `.*.*` is `.*`, and
  // `[^/?#]+[^/?#]+` is `[^/?#][^/?#][^/?#]*`. Not a query's own run, which its fork skips.
  let openRun: 'any' | 'segment' | undefined;
  const literal = (s: string) => {
    for (let i = 0; i < s.length; i++) out.push({ kind: 'char', code: s.charCodeAt(i) });
    if (s !== '') openRun = undefined;
  };
  let i = 0;
  while (i < template.length) {
    const open = template.indexOf('{', i);
    if (open < 0) {
      literal(template.slice(i));
      break;
    }
    literal(template.slice(i, open));
    const close = template.indexOf('}', open);
    if (close < 0) return null;
    const op = template[open + 1];
    if (op === '?' || op === '&') {
      out.push({ kind: 'fork', skip: 3 }, { kind: 'query' }, { kind: 'run', segment: false });
      openRun = undefined;
    } else if (op === '+' || op === '#' || op === '/' || op === '.' || op === ';') {
      if (openRun !== 'any') out.push({ kind: 'run', segment: false });
      openRun = 'any';
    } else if (openRun === 'segment') {
      out.splice(out.length - 1, 0, { kind: 'one' });
    } else {
      out.push({ kind: 'one' }, { kind: 'run', segment: true });
      openRun = 'segment';
    }
    i = close + 1;
  }
  return out;
}

/**
 * What one matcher keeps (~200 KB at most): sets of places, and the places in them all
 * together. Real templates over real URIs meet a few dozen small sets; the bounds are reached
 * only by a long literal stretch after a run, read against a URI that repeats it.
 */
const MAX_SETS = 1_024;
const MAX_PLACES = 16_384;

/** A set of places, and where each class of character leads from it (absent: not yet known). */
interface PlaceSet {
  places: number[];
  accepting: boolean;
  next: Map<number, number>;
}

/**
 * A matcher for `template`; null for one that is malformed or over MAX_TEMPLATE_LENGTH.
 * `onGiveUp` is called once, when the matcher reaches its bounds and stops matching.
 */
export function templateMatcher(template: string, onGiveUp?: () => void): TemplateMatcher | null {
  if (template.length > MAX_TEMPLATE_LENGTH) return null;
  const program = steps(template);
  if (program === null) return null;
  // The literal text before the first expression is compared as a string, and the automaton
  // starts after it: most templates start with a scheme most URIs do not share.
  const open = template.indexOf('{');
  const prefix = open < 0 ? template : template.slice(0, open);
  const nfa = new Places(program);
  const classes = new CharClasses(program);

  const sets: PlaceSet[] = [];
  const ids = new Map<string, number>();
  let kept = 0;
  let exhausted = false;
  /** The id of a set, kept if new; -1 once the bounds are reached. */
  const intern = (places: number[]): number => {
    const key = places.join(',');
    const known = ids.get(key);
    if (known !== undefined) return known;
    if (sets.length >= MAX_SETS || kept + places.length > MAX_PLACES) {
      exhausted = true;
      onGiveUp?.();
      return -1;
    }
    kept += places.length;
    ids.set(key, sets.length);
    sets.push({ places, accepting: places.includes(program.length), next: new Map() });
    return sets.length - 1;
  };
  const start = intern(nfa.start(prefix.length));

  return {
    test(uri: string): boolean {
      if (exhausted || !uri.startsWith(prefix)) return false;
      let id = start;
      for (let k = prefix.length; k < uri.length; k++) {
        const set = sets[id];
        if (set.places.length === 0) return false;
        const c = classes.of(uri.charCodeAt(k));
        let to = set.next.get(c);
        if (to === undefined) {
          to = intern(nfa.step(set.places, classes.sample(c)));
          if (to < 0) return false;
          set.next.set(c, to);
        }
        id = to;
      }
      return sets[id].accepting;
    },
  };
}

/**
 * Characters that no step tells apart share a class: those the template names, the
 * delimiters the steps test, and one class for all others.
 */
class CharClasses {
  private readonly ids = new Map<number, number>();
  private readonly samples: number[] = [];

  constructor(program: Step[]) {
    const named = [0x2f, 0x3f, 0x23, 0x26]; // / ? # &
    for (const s of program) if (s.kind === 'char') named.push(s.code);
    let other = 0;
    while (named.includes(other)) other++;
    this.samples.push(other);
    for (const code of named) {
      if (this.ids.has(code)) continue;
      this.ids.set(code, this.samples.length);
      this.samples.push(code);
    }
  }

  of(code: number): number {
    return this.ids.get(code) ?? 0;
  }

  sample(c: number): number {
    return this.samples[c];
  }
}

/** The template as a nondeterministic automaton: sets of places, stepped one character at a time. */
class Places {
  /** Each place is entered once per step: `seen` holds the number of the step that entered it. */
  private readonly seen: Float64Array;
  private stamp = 0;
  private readonly anyRun: boolean[];

  constructor(private readonly program: Step[]) {
    this.seen = new Float64Array(program.length + 1).fill(-1);
    this.anyRun = program.map((s) => s.kind === 'run' && !s.segment);
  }

  start(at: number): number[] {
    this.stamp++;
    const out: number[] = [];
    this.enter(out, at);
    return this.settle(out);
  }

  step(places: number[], code: number): number[] {
    this.stamp++;
    const out: number[] = [];
    for (const at of places) {
      const s = this.program[at];
      if (s === undefined) continue;
      if (s.kind === 'char') {
        if (s.code === code) this.enter(out, at + 1);
      } else if (s.kind === 'query') {
        if (code === 0x3f /* ? */ || code === 0x26 /* & */) this.enter(out, at + 1);
      } else if (s.kind === 'one') {
        if (inSegment(code)) this.enter(out, at + 1);
      } else if (s.kind === 'run') {
        if (!s.segment || inSegment(code)) this.enter(out, at);
      }
    }
    return this.settle(out);
  }

  /**
   * Enters a place and every place it reaches without reading. A loop, not recursion: a
   * template of hundreds of expressions must not run out of stack.
   */
  private enter(out: number[], from: number): void {
    const pending = [from];
    while (pending.length > 0) {
      const at = pending.pop()!;
      if (this.seen[at] === this.stamp) continue;
      this.seen[at] = this.stamp;
      out.push(at);
      const s = this.program[at];
      if (s?.kind === 'run') pending.push(at + 1);
      else if (s?.kind === 'fork') pending.push(at + s.skip, at + 1);
    }
  }

  /**
   * In order, without the places a run of anything stands for: whatever an earlier place
   * could still read on the way to the end, the run reads too, staying put, since every way
   * on passes it or lands just after it (a skipped query). Fewer places, fewer distinct sets.
   */
  private settle(places: number[]): number[] {
    let top = -1;
    for (const at of places) if (this.anyRun[at] && at > top) top = at;
    const out = top < 0 ? places : places.filter((at) => at >= top);
    return out.sort((a, b) => a - b);
  }
}
