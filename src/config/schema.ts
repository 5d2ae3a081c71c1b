import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../paths.js';
import { foreignKeyHint } from './foreign-keys.js';
import { nearKey } from './near-key.js';
import { keyPath, pointerSegments } from './keypath.js';

/** Where the schema lives inside the package; users point `"$schema"` at it. */
export const SCHEMA_RELATIVE_PATH = 'src/config/hub.config.schema.json';

/** Absolute path of the schema file, found from the package root at runtime. */
export function schemaFile(): string {
  return join(packageRoot, SCHEMA_RELATIVE_PATH);
}

interface Compiled {
  schema: Record<string, unknown>;
  validate: ValidateFunction;
  /** For each schema node: the `x-error` message of it or its nearest ancestor, if any. */
  customMessage: WeakMap<object, string>;
}

let compiled: Compiled | undefined;

/** The parsed JSON Schema of hub.config.json (read once). */
export function hubConfigSchema(): Record<string, unknown> {
  return compile().schema;
}

function compile(): Compiled {
  if (compiled) return compiled;
  const schema = JSON.parse(readFileSync(schemaFile(), 'utf8')) as Record<string, unknown>;
  const ajv = new Ajv2020({
    allErrors: true,
    verbose: true, // errors carry parentSchema, which leads us to the x-error messages
    useDefaults: true,
    strict: true,
    // `tools.<name>` deliberately applies `properties` without `type: object`, and the
    // "servers"/"mcpServers" exclusivity names properties in `not: {required}`.
    strictTypes: false,
    strictRequired: false,
  });
  // Our own annotation: one human message replacing every error raised inside that node.
  ajv.addKeyword({ keyword: 'x-error', schemaType: 'string' });
  const customMessage = new WeakMap<object, string>();
  const walk = (node: unknown, inherited: string | undefined): void => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const n of node) walk(n, inherited);
      return;
    }
    const own = (node as Record<string, unknown>)['x-error'];
    const msg = typeof own === 'string' ? own : inherited;
    if (msg !== undefined) customMessage.set(node, msg);
    for (const v of Object.values(node)) walk(v, msg);
  };
  walk(schema, undefined);
  compiled = { schema, validate: ajv.compile(schema), customMessage };
  return compiled;
}

/**
 * Validates `doc` against the schema and fills in schema defaults **in place**.
 * Returns one line per problem, `key.path: message`; nothing when valid.
 * Problems at `skipPaths` (values that could not be interpolated) are left out.
 */
export function validateAgainstSchema(doc: unknown, skipPaths: ReadonlySet<string> = new Set()): string[] {
  const { validate, customMessage } = compile();
  if (validate(doc)) return [];
  const lines: { path: string; message: string; isType: boolean }[] = [];
  for (const e of validate.errors ?? []) {
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

function describe(e: ErrorObject, doc: unknown, custom: WeakMap<object, string>): { path: string; message: string } {
  const at = pointerSegments(e.instancePath, doc);
  const params = e.params as Record<string, unknown>;
  // Errors about a property *name* (propertyNames) are reported at that name.
  const propertyName = (e as { propertyName?: string }).propertyName ?? params.propertyName;
  if (typeof propertyName === 'string') at.push(propertyName);

  const node = e.schema !== null && typeof e.schema === 'object' && !Array.isArray(e.schema) ? e.schema : undefined;
  const message =
    (node && custom.get(node)) ?? (e.parentSchema ? custom.get(e.parentSchema) : undefined);
  if (message !== undefined) return { path: keyPath(at), message };

  switch (e.keyword) {
    case 'additionalProperties': {
      const known = Object.keys((e.parentSchema?.properties as object | undefined) ?? {});
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
    default:
      return { path: keyPath(at), message: e.message ?? `fails ${e.keyword}` };
  }
}
