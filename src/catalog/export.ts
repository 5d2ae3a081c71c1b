/**
 * The catalog as function-calling definitions for model APIs (`switchyard tools --format`).
 *
 * OpenAI strict mode accepts a subset of JSON Schema: an object root, `additionalProperties:
 * false` on every object, every property listed in `required` (an optional one becomes
 * nullable: null stands for "absent"), `anyOf` but not `oneOf`/`allOf`, local `$ref`s, and a
 * short list of validation keywords. A schema is rewritten into that subset when the meaning
 * survives (oneOf → anyOf, unsupported validation keywords dropped: the hub still validates the
 * arguments); when it cannot be (free-form maps, tuples, external refs, …) the tool is exported
 * non-strict and listed with the reason.
 */

import { setField } from '../protocol/copy.js';

type Schema = Record<string, unknown>;

export interface ExportableTool {
  name: string;
  description?: string;
  inputSchema?: unknown;
}

export interface StrictOk {
  ok: true;
  schema: Schema;
  /** JSON pointers of optional properties made nullable (null means "leave it out"). */
  nullable: string[];
  /** What was dropped or widened on the way (for the curious; the hub validates anyway). */
  loosened: string[];
}
export interface StrictFail {
  ok: false;
  reason: string;
}

/** OpenAI's documented bounds for strict schemas. */
const MAX_DEPTH = 10;
const MAX_PROPERTIES = 5000;
const MAX_ENUM_VALUES = 1000;
const OPENAI_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const STRING_FORMATS = new Set(['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid']);
const PRIMITIVES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);
/** Keywords that carry no constraint, or none a model needs: dropped silently. */
const IGNORED = new Set(['$schema', '$id', '$comment', 'title', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly', 'contentMediaType', 'contentEncoding']);

class NotStrict extends Error {}

function isObj(v: unknown): v is Schema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

interface Walk {
  nullable: string[];
  loosened: string[];
  properties: number;
  enumValues: number;
}

/** Makes a schema accept null as well (how an optional property is expressed in strict mode). */
function nullable(s: Schema): Schema {
  if (typeof s.type === 'string') {
    const out: Schema = { ...s, type: s.type === 'null' ? 'null' : [s.type, 'null'] };
    if (Array.isArray(s.enum) && !s.enum.includes(null)) out.enum = [...s.enum, null];
    return out;
  }
  if (Array.isArray(s.type)) {
    const out: Schema = { ...s, type: s.type.includes('null') ? s.type : [...s.type, 'null'] };
    if (Array.isArray(s.enum) && !s.enum.includes(null)) out.enum = [...s.enum, null];
    return out;
  }
  if (Array.isArray(s.anyOf)) return s.anyOf.some((b) => isObj(b) && b.type === 'null') ? s : { ...s, anyOf: [...s.anyOf, { type: 'null' }] };
  if (Array.isArray(s.enum) && s.$ref === undefined) return s.enum.includes(null) ? s : { ...s, enum: [...s.enum, null] };
  const { description, ...rest } = s;
  const out: Schema = { anyOf: [rest, { type: 'null' }] };
  if (description !== undefined) out.description = description;
  return out;
}

/** Folds `allOf` branches that are plain objects into one object schema. */
function mergeAllOf(s: Schema, at: string): Schema {
  const branches = s.allOf as unknown[];
  const { allOf: _drop, ...rest } = s;
  let out: Schema = { ...rest };
  for (const b of branches) {
    if (!isObj(b)) throw new NotStrict(`${at}: allOf with a non-object branch`);
    const bt = b.type ?? (b.properties ? 'object' : undefined);
    const ot = out.type ?? (out.properties ? 'object' : undefined);
    if (bt !== undefined && ot !== undefined && bt !== ot) throw new NotStrict(`${at}: allOf of different types`);
    if (b.anyOf || b.oneOf || b.allOf || b.$ref) throw new NotStrict(`${at}: allOf of composite schemas cannot be flattened`);
    const props = { ...((out.properties as Schema) ?? {}) };
    for (const [k, v] of Object.entries((b.properties as Schema) ?? {})) {
      // Names are data: "constructor" is no property of props unless listed, "__proto__" one like any other.
      if (Object.hasOwn(props, k) && JSON.stringify(props[k]) !== JSON.stringify(v)) throw new NotStrict(`${at}: allOf branches disagree on property "${k}"`);
      setField(props, k, v);
    }
    const required = [...new Set([...((out.required as string[]) ?? []), ...((b.required as string[]) ?? [])])];
    out = { ...b, ...out, properties: props, required };
    if (bt !== undefined) out.type = bt;
  }
  return out;
}

function typesOf(s: Schema): string[] | undefined {
  if (typeof s.type === 'string') return [s.type];
  if (Array.isArray(s.type)) return s.type.map(String);
  return undefined;
}

function convert(input: unknown, at: string, depth: number, w: Walk): Schema {
  if (input === true || (isObj(input) && Object.keys(input).every((k) => IGNORED.has(k) || k === 'description')))
    throw new NotStrict(`${at || '/'}: accepts any value (no type)`);
  if (!isObj(input)) throw new NotStrict(`${at || '/'}: not a schema`);
  let s: Schema = input;
  if (Array.isArray(s.allOf)) s = mergeAllOf(s, at || '/');
  if (Array.isArray(s.oneOf)) {
    const { oneOf, ...rest } = s;
    if (Array.isArray(rest.anyOf)) throw new NotStrict(`${at || '/'}: both oneOf and anyOf`);
    s = { ...rest, anyOf: oneOf };
    w.loosened.push(`${at || '/'}: oneOf read as anyOf`);
  }
  for (const k of ['not', 'if', 'then', 'else', 'dependentSchemas', 'dependentRequired', 'dependencies', 'unevaluatedProperties', 'unevaluatedItems', 'contains', 'propertyNames', 'minProperties', 'maxProperties', 'uniqueItems', 'minLength', 'maxLength'])
    if (k in s) w.loosened.push(`${at || '/'}: "${k}" dropped`);
  const out: Schema = {};
  if (typeof s.description === 'string') out.description = s.description;

  if (s.$ref !== undefined) {
    if (typeof s.$ref !== 'string' || !s.$ref.startsWith('#')) throw new NotStrict(`${at || '/'}: $ref to another document`);
    // In 2020-12 the keywords beside a $ref apply too: keeping only the $ref would change what is accepted.
    const atRoot = at === '' ? new Set(['type', '$defs', 'definitions']) : new Set<string>();
    const beside = Object.keys(s).filter((k) => k !== '$ref' && k !== 'description' && !IGNORED.has(k) && !atRoot.has(k));
    if (beside.length) throw new NotStrict(`${at || '/'}: $ref with ${beside.map((k) => `"${k}"`).join(', ')} beside it`);
    if (at === '') throw new NotStrict('/: the root is a $ref; strict mode needs the root to be the object itself');
    out.$ref = s.$ref;
    return out;
  }
  if (Array.isArray(s.anyOf)) {
    if (s.anyOf.length === 0) throw new NotStrict(`${at || '/'}: empty anyOf`);
    const { anyOf, description: _d, ...rest } = s;
    const shared = Object.keys(rest).filter((k) => !IGNORED.has(k));
    // Keywords beside anyOf apply to every branch: push them down.
    out.anyOf = anyOf.map((b, i) => convert(shared.length && isObj(b) ? { ...rest, ...b } : b, `${at}/anyOf/${i}`, depth, w));
    return out;
  }
  if ('const' in s) {
    out.enum = [s.const];
    if (typeof s.type === 'string') out.type = s.type;
    return out;
  }
  if (Array.isArray(s.enum)) {
    w.enumValues += s.enum.length;
    if (w.enumValues > MAX_ENUM_VALUES) throw new NotStrict(`more than ${MAX_ENUM_VALUES} enum values in total`);
    out.enum = s.enum;
    if (s.type !== undefined) out.type = s.type;
    return out;
  }

  let types = typesOf(s) ?? (isObj(s.properties) ? ['object'] : isObj(s.items) ? ['array'] : undefined);
  if (!types) throw new NotStrict(`${at || '/'}: accepts any value (no type)`);
  for (const t of types) if (!PRIMITIVES.has(t)) throw new NotStrict(`${at || '/'}: unknown type "${t}"`);
  const nonNull = types.filter((t) => t !== 'null');
  if (nonNull.length > 1) {
    // Several types: one branch per type, each with only its own keywords.
    const branches = nonNull.map((t, i) => convert({ ...s, type: t, description: undefined }, `${at}/type/${i}`, depth, w));
    if (types.includes('null')) branches.push({ type: 'null' });
    out.anyOf = branches;
    return out;
  }
  // One type, or one and null ("string or null" stays exactly that, required or not).
  out.type = types.length === 1 ? types[0] : types;
  const t = nonNull[0];
  if (t === 'object') convertObject(s, out, at, depth, w);
  else if (t === 'array') {
    if (Array.isArray(s.items) || Array.isArray(s.prefixItems)) throw new NotStrict(`${at || '/'}: tuple arrays are not supported`);
    if (!isObj(s.items)) throw new NotStrict(`${at || '/'}: array without an items schema`);
    out.items = convert(s.items, `${at}/items`, depth + 1, w);
    for (const k of ['minItems', 'maxItems']) if (typeof s[k] === 'number') out[k] = s[k];
  } else if (t === 'string') {
    if (typeof s.pattern === 'string') out.pattern = s.pattern;
    if (typeof s.format === 'string') {
      if (STRING_FORMATS.has(s.format)) out.format = s.format;
      else w.loosened.push(`${at || '/'}: format "${s.format}" dropped`);
    }
  } else if (t === 'number' || t === 'integer') {
    for (const k of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf']) if (typeof s[k] === 'number') out[k] = s[k];
  }
  return out;
}

function convertObject(s: Schema, out: Schema, at: string, depth: number, w: Walk): void {
  if (depth >= MAX_DEPTH) throw new NotStrict(`${at || '/'}: objects nested deeper than ${MAX_DEPTH} levels`);
  const props = isObj(s.properties) ? s.properties : {};
  const keys = Object.keys(props);
  const extra = s.additionalProperties;
  const hasExtra = extra === true || isObj(extra) || isObj(s.patternProperties) || (extra === undefined && keys.length === 0 && at !== '');
  if (keys.length === 0 && hasExtra) throw new NotStrict(`${at || '/'}: a free-form object (any keys) cannot be strict`);
  if (keys.length && (extra === true || isObj(extra) || isObj(s.patternProperties))) w.loosened.push(`${at || '/'}: keys beyond the listed properties dropped`);
  w.properties += keys.length;
  if (w.properties > MAX_PROPERTIES) throw new NotStrict(`more than ${MAX_PROPERTIES} properties in total`);
  const required = new Set(Array.isArray(s.required) ? s.required.map(String) : []);
  const outProps: Schema = {};
  for (const k of keys) {
    const ptr = `${at}/properties/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    let p = convert(props[k], ptr, depth + 1, w);
    if (!required.has(k)) {
      p = nullable(p);
      w.nullable.push(ptr);
    }
    // A property named "__proto__" is data: plain assignment would set the object's prototype.
    Object.defineProperty(outProps, k, { value: p, enumerable: true, writable: true, configurable: true });
  }
  out.properties = outProps;
  out.required = keys;
  out.additionalProperties = false;
}

/** A tool's inputSchema rewritten for OpenAI strict mode, or why it cannot be. */
export function toStrictSchema(inputSchema: unknown): StrictOk | StrictFail {
  const w: Walk = { nullable: [], loosened: [], properties: 0, enumValues: 0 };
  try {
    const root = inputSchema === undefined ? { type: 'object', properties: {} } : inputSchema;
    if (!isObj(root)) throw new NotStrict('/: the input schema is not an object schema');
    if (root.anyOf || root.oneOf) throw new NotStrict('/: the root is a union (anyOf/oneOf); strict mode needs one object');
    const rootType = root.type ?? (isObj(root.properties) ? 'object' : undefined);
    if (rootType !== 'object') throw new NotStrict(`/: the root must be an object (it is ${JSON.stringify(rootType ?? 'untyped')})`);
    // The root may list no properties at all: a tool without arguments.
    const schema = convert({ ...root, type: 'object' }, '', 0, w);
    for (const defsKey of ['$defs', 'definitions'] as const) {
      const defs = root[defsKey];
      if (!isObj(defs)) continue;
      const outDefs: Schema = {};
      for (const [k, v] of Object.entries(defs)) setField(outDefs, k, convert(v, `/${defsKey}/${k}`, 1, w));
      schema[defsKey] = outDefs;
    }
    checkRefs(schema, schema);
    // Counted as sent: an optional property's enum gained a null.
    if (enumValuesIn(schema) > MAX_ENUM_VALUES) throw new NotStrict(`more than ${MAX_ENUM_VALUES} enum values in total`);
    return { ok: true, schema, nullable: w.nullable, loosened: w.loosened };
  } catch (err) {
    if (err instanceof NotStrict) return { ok: false, reason: err.message };
    throw err;
  }
}

function enumValuesIn(node: unknown): number {
  if (Array.isArray(node)) return node.reduce((n: number, x) => n + enumValuesIn(x), 0);
  if (!isObj(node)) return 0;
  let n = Array.isArray(node.enum) ? node.enum.length : 0;
  for (const [k, v] of Object.entries(node)) if (k !== 'enum') n += enumValuesIn(v);
  return n;
}

/** Every local $ref must point at something that exists in the converted schema. */
function checkRefs(node: unknown, root: Schema): void {
  if (Array.isArray(node)) return node.forEach((n) => checkRefs(n, root));
  if (!isObj(node)) return;
  if (typeof node.$ref === 'string') {
    let target: unknown = root;
    for (const part of node.$ref.replace(/^#\/?/, '').split('/').filter(Boolean)) {
      target = isObj(target) ? target[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
    }
    if (target === undefined) throw new NotStrict(`$ref ${node.$ref} points nowhere`);
  }
  for (const v of Object.values(node)) checkRefs(v, root);
}

/** Root keywords the APIs refuse (Anthropic answers 400 to a root anyOf, oneOf or allOf). */
const ROOT_COMPOSITION = ['anyOf', 'oneOf', 'allOf', 'not'] as const;

/**
 * The schema without keywords that some APIs reject at the root; `dropped` names the root
 * composition keywords taken out (the hub still checks the arguments against the whole schema).
 */
function plainSchema(inputSchema: unknown, dropped: string[] = []): Schema {
  if (!isObj(inputSchema)) return { type: 'object', properties: {} };
  const { $schema: _s, $id: _i, ...rest } = inputSchema;
  for (const k of ROOT_COMPOSITION)
    if (k in rest) {
      delete rest[k];
      dropped.push(k);
    }
  return rest.type === undefined ? { type: 'object', ...rest } : rest;
}

export interface OpenAiTool {
  type: 'function';
  function: { name: string; description?: string; parameters: Schema; strict: boolean };
}

export interface OpenAiExport {
  format: 'openai';
  tools: OpenAiTool[];
  /** Tools exported with strict: false, and why. */
  notStrict: { name: string; reason: string }[];
  /** Per tool, the optional properties that became nullable: a null argument means "absent". */
  nullable: Record<string, string[]>;
  /**
   * Per strict tool, what its schema lost to strict mode (validation keywords the API does not
   * take, oneOf read as anyOf): the model no longer sees those constraints, the hub still
   * checks the arguments against them; said, so a caller is not surprised by its refusals.
   */
  loosened: Record<string, string[]>;
  /** Tools left out, and why: names the API refuses (it rejects the whole request for one). */
  skipped: { name: string; reason: string }[];
}

export interface AnthropicExport {
  format: 'anthropic';
  tools: { name: string; description?: string; input_schema: Schema }[];
  /** Tools left out, and why (only names an API would refuse). */
  skipped: { name: string; reason: string }[];
  /** Tools whose schema lost root keywords the API refuses; the hub still enforces them. */
  loosened: { name: string; reason: string }[];
}

export function toOpenAi(tools: readonly ExportableTool[]): OpenAiExport {
  const out: OpenAiExport = { format: 'openai', tools: [], notStrict: [], nullable: {}, loosened: {}, skipped: [] };
  for (const t of tools) {
    // Strict or not, the API checks every function name and refuses the whole request for one
    // outside its pattern: such a tool (names.mode "spec") cannot be in a usable export.
    if (!OPENAI_NAME.test(t.name)) {
      out.skipped.push({ name: t.name, reason: 'the name does not match ^[a-zA-Z0-9_-]{1,64}$ (names.mode "spec")' });
      continue;
    }
    const fn = { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: {}, strict: false } as OpenAiTool['function'];
    const r = toStrictSchema(t.inputSchema);
    if (r.ok) {
      fn.parameters = r.schema;
      fn.strict = true;
      // Keyed by tool names, which may be "__proto__": a field (setField), not the map's prototype.
      if (r.nullable.length) setField(out.nullable, t.name, r.nullable);
      if (r.loosened.length) setField(out.loosened, t.name, r.loosened);
    } else {
      fn.parameters = plainSchema(t.inputSchema);
      out.notStrict.push({ name: t.name, reason: r.reason });
    }
    out.tools.push({ type: 'function', function: fn });
  }
  return out;
}

export function toAnthropic(tools: readonly ExportableTool[]): AnthropicExport {
  const out: AnthropicExport = { format: 'anthropic', tools: [], skipped: [], loosened: [] };
  for (const t of tools) {
    if (!OPENAI_NAME.test(t.name)) {
      out.skipped.push({ name: t.name, reason: 'the name does not match ^[a-zA-Z0-9_-]{1,64}$' });
      continue;
    }
    const dropped: string[] = [];
    const input_schema = plainSchema(t.inputSchema, dropped);
    if (dropped.length) out.loosened.push({ name: t.name, reason: `root ${dropped.map((k) => `"${k}"`).join(', ')} dropped (the API refuses it at the root; the hub still checks the arguments)` });
    out.tools.push({ name: t.name, ...(t.description ? { description: t.description } : {}), input_schema });
  }
  return out;
}
