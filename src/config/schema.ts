import type { ErrorObject, ValidateFunction } from 'ajv';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../paths.js';
import { FOREIGN_KEY_FOR, foreignKeyHint } from './foreign-keys.js';
import { durationMs } from './duration.js';
import { nearKey } from './near-key.js';
import { keyPath, pointerSegments } from './keypath.js';

/** Where the schema lives inside the package; users point `"$schema"` at it. */
export const SCHEMA_RELATIVE_PATH = 'src/config/hub.config.schema.json';

/** Absolute path of the schema file, found from the package root at runtime. */
export function schemaFile(): string {
  return join(packageRoot, SCHEMA_RELATIVE_PATH);
}

/**
 * The validator the build generates (generate-validator.ts) beside this module: compiling the
 * schema with ajv at every start took ~250 ms of CPU, and loading ajv itself more.
 */
export const GENERATED_VALIDATOR = fileURLToPath(new URL('./hub-config-validator.generated.cjs', import.meta.url));

const require = createRequire(import.meta.url);

/** How ajv compiles the schema, at build time and (the fallback) at run time alike. */
export const AJV_OPTIONS = {
  allErrors: true,
  verbose: true, // errors carry parentSchema, which leads us to the x-error messages
  useDefaults: true,
  strict: true,
  // `tools.<name>` deliberately applies `properties` without `type: object`, and the
  // "servers"/"mcpServers" exclusivity names properties in `not: {required}`.
  strictTypes: false,
  strictRequired: false,
} as const;

/** Bump when the generated module's shape changes: an older one is then not used. */
const GENERATED_FORMAT = 1;

/**
 * What a generated validator must have been generated from to be used: the schema's text, the
 * options and the ajv installed. A stale build (schema edited, `tsc` run but not the generator,
 * ajv updated since) compiles instead.
 */
export function schemaKey(schemaText: string): string {
  const ajvVersion = (require('ajv/package.json') as { version: string }).version;
  return createHash('sha256').update(`${GENERATED_FORMAT}\n${ajvVersion}\n${JSON.stringify(AJV_OPTIONS)}\n${schemaText}`).digest('hex');
}

/** A new ajv for the schema, loaded only when it is needed (ajv is CommonJS). */
export function newAjv(extra: Record<string, unknown> = {}): InstanceType<typeof import('ajv/dist/2020.js').Ajv2020> {
  const { Ajv2020 } = require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js');
  const ajv = new Ajv2020({ ...AJV_OPTIONS, ...extra });
  // Our own annotation: one human message replacing every error raised inside that node.
  ajv.addKeyword({ keyword: 'x-error', schemaType: 'string' });
  return ajv;
}

/** What the generated module exports (see generate-validator.ts). */
interface GeneratedModule {
  (doc: unknown): boolean;
  errors?: ErrorObject[] | null;
  key?: unknown;
  /** The schema objects its errors point into (`parentSchema`), by JSON Pointer ("" the root). */
  schemaNodes?: Record<string, object>;
}

export interface Compiled {
  schema: Record<string, unknown>;
  validate: ValidateFunction | GeneratedModule;
  /** For each schema node: the `x-error` message of it or its nearest ancestor, if any. */
  customMessage: WeakMap<object, string>;
  /** Whether the build's generated validator is used, or the schema was compiled at run time. */
  from: 'generated' | 'compiled';
}

let compiled: Compiled | undefined;

/** The parsed JSON Schema of hub.config.json (read once). */
export function hubConfigSchema(): Record<string, unknown> {
  return compile().schema;
}

function compile(): Compiled {
  return (compiled ??= compileSchema(readFileSync(schemaFile(), 'utf8'), GENERATED_VALIDATOR));
}

/**
 * The validator of `schemaText`: the generated module at `generated` when it was generated
 * from that very text, else compiled now (no build step, an old build, a failed generation).
 */
export function compileSchema(schemaText: string, generated: string): Compiled {
  return fromGenerated(schemaText, generated) ?? atRunTime(schemaText);
}

function fromGenerated(schemaText: string, file: string): Compiled | undefined {
  let mod: GeneratedModule;
  try {
    mod = require(file) as GeneratedModule;
  } catch {
    return undefined;
  }
  const nodes = mod.schemaNodes;
  const root = nodes?.[''];
  if (typeof mod !== 'function' || mod.key !== schemaKey(schemaText) || !nodes || !root) return undefined;
  // Errors point into the module's own copies of the schema: the root, and each $ref'd
  // definition it compiled as a function of its own. Each inherits the messages above it.
  const customMessage = new WeakMap<object, string>();
  walkMessages(root, undefined, customMessage);
  for (const [pointer, node] of Object.entries(nodes)) {
    if (pointer !== '') walkMessages(node, messageAbove(root, pointer), customMessage);
  }
  return { schema: root as Record<string, unknown>, validate: mod, customMessage, from: 'generated' };
}

function atRunTime(schemaText: string): Compiled {
  const schema = JSON.parse(schemaText) as Record<string, unknown>;
  const customMessage = new WeakMap<object, string>();
  walkMessages(schema, undefined, customMessage);
  return { schema, validate: newAjv().compile(schema), customMessage, from: 'compiled' };
}

function walkMessages(node: unknown, inherited: string | undefined, into: WeakMap<object, string>): void {
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const n of node) walkMessages(n, inherited, into);
    return;
  }
  const own = (node as Record<string, unknown>)['x-error'];
  const msg = typeof own === 'string' ? own : inherited;
  if (msg !== undefined) into.set(node, msg);
  for (const v of Object.values(node)) walkMessages(v, msg, into);
}

/** The `x-error` the node at `pointer` inherits from its ancestors in `root`, as walkMessages gives it. */
function messageAbove(root: object, pointer: string): string | undefined {
  let node: unknown = root;
  let msg: string | undefined;
  for (const seg of pointer.split('/').slice(1).map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'))) {
    if (node === null || typeof node !== 'object') return msg;
    if (!Array.isArray(node)) {
      const own = (node as Record<string, unknown>)['x-error'];
      if (typeof own === 'string') msg = own;
    }
    node = (node as Record<string, unknown>)[seg];
  }
  return msg;
}

/**
 * Validates `doc` against the schema and fills in schema defaults **in place**.
 * Returns one line per problem, `key.path: message`; nothing when valid.
 * Problems at `skipPaths` (values that could not be interpolated) are left out.
 */
export function validateAgainstSchema(doc: unknown, skipPaths: ReadonlySet<string> = new Set()): string[] {
  return validateWith(compile(), doc, skipPaths);
}

/** validateAgainstSchema with a given validator (the tests compare the generated one with ajv's). */
export function validateWith({ validate, customMessage }: Compiled, doc: unknown, skipPaths: ReadonlySet<string> = new Set()): string[] {
  if (validate(doc)) return [];
  const lines: { path: string; message: string; isType: boolean }[] = [];
  for (const e of sayOnce(validate.errors ?? [])) {
    // "must match the then schema" only repeats the errors of that branch, which are reported.
    if (e.keyword === 'if') continue;
    const line = describe(e, doc, customMessage);
    lines.push({ ...line, isType: e.keyword === 'type' && customMessage.get(e.parentSchema as object) === undefined });
  }
  // A value of the wrong type makes every other complaint about it (or below it) noise.
  const typeWrong = lines.filter((l) => l.isType).map((l) => l.path);
  const below = (path: string, top: string): boolean =>
    path === top || path.startsWith(`${top}.`) || path.startsWith(`${top}[`) || top === 'config';
  const seen = new Set<string>();
  const out: string[] = [];
  for (const l of lines) {
    if (skipPaths.has(l.path)) continue;
    if (!l.isType && typeWrong.some((t) => below(l.path, t))) continue;
    const text = `${l.path}: ${l.message}`;
    if (!seen.has(text)) {
      seen.add(text);
      out.push(text);
    }
  }
  return out;
}

/**
 * The errors that say what is wrong, for one mistake one line:
 * - a value of one of several shapes (oneOf/anyOf) whose type fits exactly one of them is told
 *   what is wrong inside that shape alone: `inheritEnv: ["*"]` is an array with a bad name, not
 *   also "must be true, false or an array" (the other branch's "must be boolean", the oneOf's own).
 * - a key missing beside an unknown key that is a near spelling of it (`{"pth": …}`) is that
 *   misspelling, said once, by the unknown key; so is a shape of the object that requires it
 *   (a server's `"comand"`, not also "must have exactly one of "command" or "url"").
 */
function sayOnce(errors: readonly ErrorObject[]): ErrorObject[] {
  const dropped = new Set<ErrorObject>();
  for (const c of errors) {
    if ((c.keyword !== 'oneOf' && c.keyword !== 'anyOf') || !Array.isArray(c.schema)) continue;
    // oneOf failed as more than one shape fits: no branch has errors to prefer.
    if ((c.params as { passingSchemas?: unknown }).passingSchemas != null) continue;
    // One schema node checks many values (each key of an additionalProperties, each item): a
    // branch's errors are those about this value, or below it.
    const branchOf = (e: ErrorObject): number | undefined => {
      if (e.instancePath !== c.instancePath && !e.instancePath.startsWith(`${c.instancePath}/`)) return undefined;
      if (!e.schemaPath.startsWith(`${c.schemaPath}/`)) return undefined;
      const i = Number(e.schemaPath.slice(c.schemaPath.length + 1).split('/', 1)[0]);
      return Number.isInteger(i) ? i : undefined;
    };
    const wrongType = new Set<number>();
    for (const e of errors) {
      const i = branchOf(e);
      if (i !== undefined && e.keyword === 'type' && e.instancePath === c.instancePath && e.schemaPath === `${c.schemaPath}/${i}/type`) wrongType.add(i);
    }
    const fitting = [...c.schema.keys()].filter((i) => !wrongType.has(i));
    if (fitting.length !== 1) continue;
    dropped.add(c);
    for (const e of errors) {
      const i = branchOf(e);
      if (i !== undefined && i !== fitting[0]) dropped.add(e);
    }
  }
  const misspeltRequired = new Set<ErrorObject>();
  for (const r of errors) {
    if (r.keyword !== 'required' || dropped.has(r)) continue;
    const missing = String((r.params as { missingProperty?: unknown }).missingProperty);
    // The object's own `required`, or one in a shape of it (a server's oneOf of "command" and "url").
    const misspelt = errors.some(
      (e) =>
        e.keyword === 'additionalProperties' &&
        e.instancePath === r.instancePath &&
        r.schemaPath.startsWith(`${e.schemaPath.slice(0, -'additionalProperties'.length)}`) &&
        renamedKey(String((e.params as { additionalProperty?: unknown }).additionalProperty), knownKeys(e)) === missing,
    );
    if (misspelt) misspeltRequired.add(r);
  }
  // A oneOf or anyOf of shapes that each require a key (`"command"` or `"url"`) failed as one of
  // those keys is misspelt: its message ("must have exactly one of …") is the misspelling again.
  for (const c of errors) {
    if (c.keyword !== 'oneOf' && c.keyword !== 'anyOf') continue;
    if ((c.params as { passingSchemas?: unknown }).passingSchemas != null) continue;
    const inside = (e: ErrorObject): boolean => e.instancePath === c.instancePath && e.schemaPath.startsWith(`${c.schemaPath}/`);
    if (![...misspeltRequired].some(inside)) continue;
    dropped.add(c);
    // The other shapes' "is required" too (`"url" is required`): what is wrong inside is still said.
    for (const e of errors) if (inside(e) && e.keyword === 'required') dropped.add(e);
  }
  for (const r of misspeltRequired) dropped.add(r);
  return errors.filter((e) => !dropped.has(e));
}

/**
 * The fix for a server id of other characters (`my_server`, `github.com`, as clients' configs
 * name servers): the id they would make, as `init --from` makes it. `_` is refused too, since
 * `__` ends the prefix the id gives its tools' names.
 */
function renamed(name: string, pattern: unknown): string {
  if (pattern !== '^[A-Za-z0-9-]+$') return '';
  const id = name.replace(/[^A-Za-z0-9-]+/g, '-').replace(/^-+|-+$/g, '');
  return id ? ` (letters, digits and "-" only: rename it, such as "${id}")` : ' (letters, digits and "-" only: rename it)';
}

/** The known key an unknown one stands for: a near spelling, or a client's name for it (`serverUrl`). */
function renamedKey(key: string, known: string[]): string | undefined {
  const other = Object.hasOwn(FOREIGN_KEY_FOR, key) ? FOREIGN_KEY_FOR[key] : undefined;
  return other !== undefined && known.includes(other) ? other : nearKey(key, known);
}

/** The keys an object node of the schema names (its `properties`). */
function knownKeys(e: ErrorObject): string[] {
  return Object.keys((e.parentSchema?.properties as object | undefined) ?? {});
}

function describe(e: ErrorObject, doc: unknown, custom: WeakMap<object, string>): { path: string; message: string } {
  const at = pointerSegments(e.instancePath, doc);
  const params = e.params as Record<string, unknown>;
  // Errors about a property *name* (propertyNames) are reported at that name.
  const propertyName = (e as { propertyName?: string }).propertyName ?? params.propertyName;
  if (typeof propertyName === 'string') at.push(propertyName);

  const node = e.schema !== null && typeof e.schema === 'object' && !Array.isArray(e.schema) ? e.schema : undefined;
  // A misspelt key is said as such, even where a shape's x-error would stand for the rest.
  const misspelt = e.keyword === 'additionalProperties' && nearKey(String(params.additionalProperty), knownKeys(e)) !== undefined;
  const message = misspelt ? undefined : ((node && custom.get(node)) ?? (e.parentSchema ? custom.get(e.parentSchema) : undefined));
  if (message !== undefined) return { path: keyPath(at), message: message + (typeof propertyName === 'string' ? renamed(propertyName, ((node ?? e.parentSchema) as { pattern?: unknown } | undefined)?.pattern) : '') };

  switch (e.keyword) {
    case 'additionalProperties': {
      const known = knownKeys(e);
      const key = String(params.additionalProperty);
      at.push(key);
      const hint = foreignKeyHint(key, known);
      if (hint) return { path: keyPath(at), message: `unknown key: ${hint}` };
      const near = nearKey(key, known);
      return { path: keyPath(at), message: `unknown key${near ? `: did you mean "${near}"?` : ''}${known.length ? ` (expected one of: ${known.join(', ')})` : ''}` };
    }
    case 'required':
      at.push(String(params.missingProperty));
      return { path: keyPath(at), message: 'is required' };
    case 'enum':
      return {
        path: keyPath(at),
        message: `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      };
    case 'const':
      return { path: keyPath(at), message: `must be ${JSON.stringify(params.allowedValue)}` };
    // A number written in quotes ("7410", "30s" for a timeout): "must be integer" alone read as
    // nonsense to whoever sees a number there. Only text that is a number or a duration is
    // quoted back (any other string in such a field could be a secret put in the wrong place).
    case 'type': {
      const want = String(params.type);
      if ((want === 'integer' || want === 'number') && typeof e.data === 'string') {
        const text = e.data.trim();
        if (/^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/.test(text)) return { path: keyPath(at), message: `must be ${want}: write ${text} without quotes` };
        const ms = durationMs(text);
        const key = at[at.length - 1];
        if (ms !== undefined && typeof key === 'string' && /Ms$/.test(key)) return { path: keyPath(at), message: `must be ${want}, in milliseconds: ${ms} for "${text}"` };
      }
      return { path: keyPath(at), message: e.message ?? `fails ${e.keyword}` };
    }
    // ajv's "must NOT have fewer than 1 characters" (or items) for what is only empty.
    case 'minLength':
    case 'minItems':
      if (params.limit === 1) return { path: keyPath(at), message: 'must not be empty' };
      return { path: keyPath(at), message: e.message ?? `fails ${e.keyword}` };
    default:
      return { path: keyPath(at), message: e.message ?? `fails ${e.keyword}` };
  }
}
