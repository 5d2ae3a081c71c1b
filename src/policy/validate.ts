import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import type { Ajv, ErrorObject, Options, ValidateFunction } from 'ajv';
import type { Logger } from '../log.js';
import { shownValue } from '../protocol/shown-value.js';
import { PatternBudgetError, RegexSandbox } from './regex-sandbox.js';
import { HostilePatternError, safeRegExpEngine, type SafeRegExpEngine } from './safe-regex.js';
import { DEFAULT_SCHEMA_LIMITS, depthExceeds, schemaOutOfBounds, type SchemaLimits } from './schema-bounds.js';

/**
 * Argument and result validation at the hub (digest §3.4): tool `inputSchema` before a call is
 * forwarded, `structuredContent` against `outputSchema` after. JSON Schema 2020-12 unless
 * `$schema` names draft-07; other dialects are reported, never silently accepted. Network
 * `$ref`s are never fetched (no loadSchema), so an external reference fails the compile and the
 * schema is refused. Each distinct schema is compiled once (cached by its hash); a schema that
 * is out of bounds or whose pattern is hostile makes its tool quarantined (`flagged`).
 */
export type Dialect = '2020-12' | 'draft-07';

const require = createRequire(import.meta.url);

/** One ajv per dialect, loaded when a schema is first compiled (ajv is CommonJS). */
function ajvPair(options: Options): Record<Dialect, Ajv | Ajv2020> {
  const { Ajv2020 } = require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js');
  const { Ajv } = require('ajv') as typeof import('ajv');
  return { '2020-12': new Ajv2020(options), 'draft-07': new Ajv(options) };
}

export type ArgsVerdict =
  | { ok: true }
  /** The arguments do not match: EINVAL, the upstream is not called. */
  | { ok: false; kind: 'invalid'; pointer: string; reason: string }
  /** The schema cannot be used (hostile, unsupported, broken): the tool is quarantined. */
  | { ok: false; kind: 'unusable'; reason: string };

export type OutputVerdict = { ok: true } | { ok: false; pointer: string; reason: string };

/**
 * Longest string whose pattern check past its budget quarantines the tool: that long, only
 * exponential backtracking takes 100 ms. Past it the time may be the value's doing (polynomial
 * backtracking on a long string): `\S+@\S+\.\S+`, an ordinary e-mail pattern, took 200 ms on
 * 1,024 characters, so one caller's long string quarantined the tool for everyone.
 */
const QUARANTINE_INPUT_MAX = 64;

/** SchemaValidator.runOnce's answer for "check the value again". */
const AGAIN = Symbol('again');

/** Deepest argument value accepted (JSON nesting). */
const MAX_ARGS_DEPTH = 64;
/**
 * Compiled schemas kept; past this the oldest are compiled again when next needed. Also how many
 * schemas one pair of ajv instances compiles before a fresh pair takes over.
 */
const CACHE_MAX = 4096;
const COMPILE_WARN_MS = 500;

type Entry = { validate: ValidateFunction } | { unusable: string };

const CANONICAL: Record<Dialect, string> = {
  '2020-12': 'https://json-schema.org/draft/2020-12/schema',
  'draft-07': 'http://json-schema.org/draft-07/schema#',
};

function dialectOf(schema: unknown): Dialect | { unsupported: string } {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return '2020-12';
  const s = (schema as { $schema?: unknown }).$schema;
  if (s === undefined) return '2020-12';
  // As JSON, not String(): an object with its own non-function toString has no primitive, and String() threw.
  if (typeof s !== 'string') return { unsupported: shownValue(s) };
  const norm = s.replace(/^https?:\/\//, '').replace(/#$/, '');
  if (norm === 'json-schema.org/draft/2020-12/schema') return '2020-12';
  if (norm === 'json-schema.org/draft-07/schema') return 'draft-07';
  return { unsupported: s };
}

/** The base the hub gives a root without `$id` (`.invalid`: no such host, and nothing is fetched anyway). */
const PRIVATE_BASE = 'https://switchyard.invalid/';

/**
 * An unresolved `$ref` as the schema's author wrote it: a pointer into the schema itself that
 * finds nothing is a definition it lacks, not a document the hub would not fetch, and neither
 * names the private base the hub gave the root.
 */
function missingRefReason(ref: string, rootId: string | undefined): string {
  const doc = ref.split('#')[0];
  if (rootId !== undefined && doc === rootId.split('#')[0])
    return `the schema refers to ${JSON.stringify(ref.slice(doc.length).slice(0, 200))}, which it does not define`;
  const shown = ref.startsWith(PRIVATE_BASE) ? ref.slice(PRIVATE_BASE.length).replace(/^\d+\//, '') : ref;
  return `the schema references ${JSON.stringify(shown.slice(0, 200))}, which the hub does not fetch`;
}

function escapeToken(t: string): string {
  return t.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** A JSON pointer into the arguments and a short reason, from ajv's first error. */
function describe(e: ErrorObject): { pointer: string; reason: string } {
  const p = e.params as Record<string, unknown>;
  if (e.keyword === 'required') return { pointer: `${e.instancePath}/${escapeToken(String(p.missingProperty))}`, reason: 'is required' };
  if (e.keyword === 'additionalProperties' || e.keyword === 'unevaluatedProperties')
    return { pointer: `${e.instancePath}/${escapeToken(String(p.additionalProperty ?? p.unevaluatedProperty))}`, reason: 'is not an allowed property' };
  // ajv says only "must be equal to one of the allowed values" / "to constant": the values are
  // what a model needs to correct its call (digest §3.1: tool errors are for self-correction).
  if (e.keyword === 'enum' && Array.isArray(p.allowedValues)) return { pointer: e.instancePath, reason: `must be one of ${listed(p.allowedValues)}` };
  if (e.keyword === 'const') return { pointer: e.instancePath, reason: `must be ${listed([p.allowedValue])}` };
  return { pointer: e.instancePath, reason: (e.message ?? `fails ${e.keyword}`).slice(0, 200) };
}

/** Values as JSON, comma-separated, cut at about 200 characters (an enum may hold thousands). */
function listed(values: unknown[]): string {
  let out = '';
  for (const [i, v] of values.entries()) {
    const next = (i ? ', ' : '') + (JSON.stringify(v) ?? 'null');
    if (out.length + next.length > 200) return out ? `${out}, … (${values.length} values)` : `${next.slice(0, 200)}…`;
    out += next;
  }
  return out;
}

export interface ValidatorOptions {
  limits?: SchemaLimits;
  /** Time budget of one pattern check that runs in the sandbox. */
  patternBudgetMs?: number;
  /** Time budget of every pattern check of one value together (default 5 times patternBudgetMs). */
  patternTotalMs?: number;
  /** See CACHE_MAX. */
  cacheMax?: number;
  /** A compile longer than this is logged (default COMPILE_WARN_MS). */
  compileWarnMs?: number;
}

export class SchemaValidator {
  /**
   * Quarantined tools, as calls found them: hub name → why (shown to operators: admin
   * /admin/tools, doctor). A tool whose schemas can be used again leaves it; at most `cacheMax`
   * names, the oldest forgotten first.
   */
  readonly flagged = new Map<string, string>();
  private readonly sandbox: RegexSandbox;
  private readonly patterns: SafeRegExpEngine;
  private readonly patternTotalMs: number;
  private readonly ajvOptions: Options;
  /** Made at the first compile: ajv is loaded then (~0.1 s of CPU a hub start did not need). */
  private ajv: Record<Dialect, Ajv | Ajv2020> | undefined;
  /** Schemas the current `ajv` pair has compiled (or tried to). */
  private onInstance = 0;
  private readonly cacheMax: number;
  private readonly compileWarnMs: number;
  private readonly byHash = new Map<string, Entry>();
  private byObject = new WeakMap<object, Entry>();
  private readonly limits: SchemaLimits;
  /** Schemas compiled so far (each copy's private `$id`). */
  private compiled = 0;

  constructor(
    private readonly log: Logger,
    opts: ValidatorOptions = {},
  ) {
    this.limits = opts.limits ?? DEFAULT_SCHEMA_LIMITS;
    this.sandbox = new RegexSandbox(opts.patternBudgetMs ?? 100);
    this.patterns = safeRegExpEngine(this.sandbox);
    this.patternTotalMs = opts.patternTotalMs ?? 5 * this.sandbox.budgetMs;
    this.cacheMax = opts.cacheMax ?? CACHE_MAX;
    this.compileWarnMs = opts.compileWarnMs ?? COMPILE_WARN_MS;
    this.ajvOptions = {
      strict: false, // upstream schemas carry vendor keywords (x-mcp-header …) and unknown formats
      allErrors: false, // one error is enough, and bounds the work on hostile input
      validateFormats: false,
      // multipleOf by the quotient's distance from a whole number: as division of binary
      // fractions, 0.07 / 0.01 is 7.000000000000001, and ajv's default (is the quotient an
      // integer?) refused 159 of the first 1,000 amounts in cents against multipleOf 0.01.
      multipleOfPrecision: 6,
      addUsedSchema: false, // `$id`s of one tool never leak into another's `$ref`s
      // An argument is the object's own key: read plainly, an optional `constructor` (toString,
      // valueOf …) left out was Object's function, so every call without it was refused, and a
      // required one left out passed. Costs a hasOwnProperty per property present (about 12 ns
      // each, measured: 8 properties, 5 given, 12 → 72 ns a validation).
      ownProperties: true,
      logger: false,
      // The optimiser's passes more than doubled the compile of a large schema (998 properties
      // of four keywords: 3.3 s against 1.4 s) and recurse as deep as its code nests.
      code: { regExp: this.patterns, optimize: false },
    };
    this.freshAjv();
  }

  /**
   * A new pair of ajv instances (made at the next compile), and every compiled schema forgotten
   * (found again by its hash, compiled on the new pair). An ajv instance keeps each schema it compiled, its patterns and
   * generated code in its scope for as long as it lives, removeSchema or not: 20,000 schemas of
   * an upstream whose schemas change held 180 MB. Quarantines (no validator) are kept.
   */
  private freshAjv(): void {
    this.ajv = undefined;
    this.onInstance = 0;
    this.byObject = new WeakMap();
    for (const [hash, e] of this.byHash) if ('validate' in e) this.byHash.delete(hash);
  }

  checkArgs(hubName: string, tool: { inputSchema?: unknown; outputSchema?: unknown }, args: unknown): ArgsVerdict {
    const verdict = this.argsVerdict(hubName, tool, args);
    // Its schemas can be used (again: the server changed them): no longer quarantined.
    if (verdict.ok || verdict.kind === 'invalid') this.flagged.delete(hubName);
    return verdict;
  }

  private argsVerdict(hubName: string, tool: { inputSchema?: unknown; outputSchema?: unknown }, args: unknown): ArgsVerdict {
    // A result that could never be checked is found now, before the tool runs for nothing.
    if (tool.outputSchema !== undefined) {
      const out = this.entry(hubName, tool.outputSchema);
      if ('unusable' in out) return { ok: false, kind: 'unusable', reason: `its outputSchema cannot be used: ${out.unusable}` };
    }
    if (tool.inputSchema === undefined) return { ok: true };
    const entry = this.entry(hubName, tool.inputSchema);
    if ('unusable' in entry) return { ok: false, kind: 'unusable', reason: entry.unusable };
    if (depthExceeds(args, MAX_ARGS_DEPTH)) return { ok: false, kind: 'invalid', pointer: '', reason: `is nested deeper than ${MAX_ARGS_DEPTH} levels` };
    const r = this.run(hubName, tool.inputSchema, entry.validate, args);
    return r.ok ? r : 'unusable' in r ? { ok: false, kind: 'unusable', reason: r.unusable } : { ok: false, kind: 'invalid', ...r.error };
  }

  /** Checks a non-error result's `structuredContent` when the tool declares an `outputSchema`. */
  checkOutput(hubName: string, tool: { outputSchema?: unknown }, result: Record<string, unknown>): OutputVerdict {
    if (tool.outputSchema === undefined || result.isError === true) return { ok: true };
    if (result.structuredContent === undefined) return { ok: false, pointer: '', reason: 'is missing although the tool declares an outputSchema' };
    const entry = this.entry(hubName, tool.outputSchema);
    if ('unusable' in entry) return { ok: false, pointer: '', reason: `cannot be checked: ${entry.unusable}` };
    const r = this.run(hubName, tool.outputSchema, entry.validate, result.structuredContent);
    if (r.ok) return r;
    return 'unusable' in r ? { ok: false, pointer: '', reason: `cannot be checked: ${r.unusable}` } : { ok: false, ...r.error };
  }

  close(): void {
    this.sandbox.close();
  }

  private run(
    hubName: string,
    schema: unknown,
    validate: ValidateFunction,
    data: unknown,
  ): { ok: true } | { error: { pointer: string; reason: string }; ok?: undefined } | { unusable: string; ok?: undefined } {
    for (let attempt = 1; ; attempt++) {
      const verdict = this.runOnce(hubName, schema, validate, data, attempt);
      if (verdict !== AGAIN) return verdict;
    }
  }

  private runOnce(
    hubName: string,
    schema: unknown,
    validate: ValidateFunction,
    data: unknown,
    attempt: number,
  ): { ok: true } | { error: { pointer: string; reason: string }; ok?: undefined } | { unusable: string; ok?: undefined } | typeof AGAIN {
    try {
      // The pattern checks of this value share one budget (safeRegExpEngine.begin).
      this.patterns.begin(this.patternTotalMs);
      if (validate(data)) return { ok: true };
      return { error: describe(validate.errors![0]) };
    } catch (err) {
      if (err instanceof PatternBudgetError) {
        // Many strings that together take the checks past the value's budget: that value is
        // refused; no one pattern is to blame.
        if (err.shared)
          return { error: { pointer: '', reason: `has strings that took longer than ${err.budgetMs} ms in all to check against the patterns of the schema; too costly to check, so not accepted` } };
        // A long string can take any pattern past the budget (an unanchored scan is quadratic,
        // a few unbounded quantifiers make it cubic or worse): that value is refused, and the
        // tool is not taken from everyone else by one caller.
        if (err.inputLength > QUARANTINE_INPUT_MAX)
          return { error: { pointer: '', reason: `has a string of ${err.inputLength} characters that took longer than ${err.budgetMs} ms to check against a pattern of the schema; too costly to check, so not accepted` } };
        // A short one past it: the pattern backtracks catastrophically, or the sandbox's thread
        // was not run in time on a busy machine, which would take the tool from everyone until a
        // restart. The check is run again with more time first: a pattern that backtracks is
        // still running then; otherwise the value is checked once more, as it came.
        if (!this.sandbox.backtracks(err)) {
          if (attempt < 2) return AGAIN;
          return { error: { pointer: '', reason: `took longer than ${err.budgetMs} ms to check against a pattern of the schema while the hub was busy; try again` } };
        }
        const reason = `a pattern check took longer than ${err.budgetMs} ms (catastrophic backtracking)`;
        this.quarantine(hubName, schema, reason);
        return { unusable: reason };
      }
      if (err instanceof RangeError) {
        // Data too deep for the recursion is the caller's; data of bounded depth that still
        // overflows the stack means the schema itself has no end ($refs that loop through
        // allOf and the like): the tool is quarantined, not the call blamed and retried.
        if (depthExceeds(data, MAX_ARGS_DEPTH)) return { error: { pointer: '', reason: 'is nested too deeply to check' } };
        const reason = 'the schema refers to itself without end (a $ref loop)';
        this.quarantine(hubName, schema, reason);
        return { unusable: reason };
      }
      this.log.warn({ tool: hubName, err: (err as Error)?.message }, 'schema validation failed unexpectedly');
      return { unusable: 'the schema could not be evaluated' };
    } finally {
      this.patterns.end();
    }
  }

  private entry(hubName: string, schema: unknown): Entry {
    const isObj = schema !== null && typeof schema === 'object';
    const cached = isObj ? this.byObject.get(schema) : undefined;
    if (cached) return this.noteUnusable(hubName, cached);
    let serialised: string;
    try {
      serialised = JSON.stringify(schema) ?? 'null';
    } catch {
      return this.noteUnusable(hubName, { unusable: 'the schema is not JSON' });
    }
    const dialect = dialectOf(schema);
    const hash = createHash('sha256').update(typeof dialect === 'string' ? dialect : 'x').update('\0').update(serialised).digest('base64url');
    let entry = this.byHash.get(hash);
    if (!entry) {
      entry = this.compile(hubName, schema, serialised, dialect);
      if (this.byHash.size >= this.cacheMax) this.byHash.delete(this.byHash.keys().next().value!);
      this.byHash.set(hash, entry);
    }
    if (isObj) this.byObject.set(schema, entry);
    return this.noteUnusable(hubName, entry);
  }

  private compile(hubName: string, schema: unknown, serialised: string, dialect: Dialect | { unsupported: string }): Entry {
    if (typeof dialect !== 'string') return { unusable: `unsupported JSON Schema dialect ${JSON.stringify(dialect.unsupported.slice(0, 120))} (the hub checks 2020-12 and draft-07)` };
    if (typeof schema !== 'boolean' && (schema === null || typeof schema !== 'object' || Array.isArray(schema)))
      return { unusable: 'the schema is not an object' };
    let out: string | undefined;
    try {
      out = schemaOutOfBounds(schema, serialised, this.limits);
    } catch (err) {
      out = `its bounds could not be checked (${String((err as Error)?.message ?? err).slice(0, 120)})`;
    }
    if (out) return { unusable: `hostile schema: ${out}` };
    if (this.onInstance >= this.cacheMax) this.freshAjv();
    this.onInstance++;
    const ajv = (this.ajv ??= ajvPair(this.ajvOptions))[dialect];
    const t0 = performance.now();
    // Compile a private copy: ajv caches by object, and the upstream's object may be mutated later.
    const copy = JSON.parse(serialised) as Record<string, unknown>;
    try {
      // Named as ajv knows the dialect (dialectOf took http:// or a missing '#' for the same one).
      if (copy.$schema !== undefined) copy.$schema = CANONICAL[dialect];
      // A root without `$id` has no base for `$ref: "#"` (a recursive tree), which ajv then
      // cannot resolve; a name of its own gives it one (addUsedSchema: false keeps it private).
      // A URL, not a URN: a relative `$ref` ("defs.json") resolves against it to something that
      // can be named in the refusal (against a URN ajv failed with "URN without nid").
      if (typeof copy === 'object' && copy !== null && copy.$id === undefined) copy.$id = `${PRIVATE_BASE}${++this.compiled}/root.json`;
      const validate = ajv.compile(copy);
      const ms = performance.now() - t0;
      // Named: the compile held every client's requests, and the operator needs to know whose schema did.
      if (ms > this.compileWarnMs) this.log.warn({ tool: hubName, ms: Math.round(ms) }, 'slow schema compile');
      return { validate };
    } catch (err) {
      if (err instanceof HostilePatternError) return { unusable: `hostile schema: ${err.message}` };
      const e = err as { missingRef?: string; message?: string };
      if (e.missingRef !== undefined) return { unusable: missingRefReason(String(e.missingRef), typeof copy?.$id === 'string' ? copy.$id : undefined) };
      return { unusable: `the schema is invalid: ${String(e.message ?? err).slice(0, 200)}` };
    }
  }

  private quarantine(hubName: string, schema: unknown, reason: string): void {
    const entry: Entry = { unusable: reason };
    if (schema !== null && typeof schema === 'object') this.byObject.set(schema, entry);
    try {
      const dialect = dialectOf(schema);
      const hash = createHash('sha256').update(typeof dialect === 'string' ? dialect : 'x').update('\0').update(JSON.stringify(schema)).digest('base64url');
      this.byHash.set(hash, entry);
    } catch {
      // already unusable through the object entry
    }
    this.noteUnusable(hubName, entry);
  }

  private noteUnusable(hubName: string, entry: Entry): Entry {
    if ('unusable' in entry && this.flagged.get(hubName) !== entry.unusable) {
      if (!this.flagged.has(hubName) && this.flagged.size >= this.cacheMax) this.flagged.delete(this.flagged.keys().next().value!);
      this.flagged.set(hubName, entry.unusable);
      this.log.warn({ tool: hubName, reason: entry.unusable }, 'tool quarantined: its schema cannot be used safely');
    }
    return entry;
  }
}
