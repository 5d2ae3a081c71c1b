/**
 * Cheap structural bounds on a tool's JSON Schema, checked before ajv ever sees it: ajv's
 * compile time grows with the size of the schema, so bounding size, depth and node count
 * bounds the compile (a hostile upstream cannot stall the hub with one tools/list).
 */
export interface SchemaLimits {
  /** Serialised size in bytes. */
  maxBytes: number;
  /** Nesting of objects and arrays. */
  maxDepth: number;
  /** Objects, arrays and values together. */
  maxNodes: number;
  /** Entries of one `enum`. */
  maxEnum: number;
}

export const DEFAULT_SCHEMA_LIMITS: SchemaLimits = { maxBytes: 256 * 1024, maxDepth: 48, maxNodes: 20_000, maxEnum: 5_000 };

/** Why the schema is out of bounds, or undefined. Iterative: a deep schema cannot overflow the stack here. */
export function schemaOutOfBounds(schema: unknown, serialised: string, limits: SchemaLimits = DEFAULT_SCHEMA_LIMITS): string | undefined {
  if (Buffer.byteLength(serialised) > limits.maxBytes) return `schema larger than ${limits.maxBytes} bytes`;
  const stack: { v: unknown; d: number }[] = [{ v: schema, d: 1 }];
  let nodes = 0;
  while (stack.length) {
    const { v, d } = stack.pop()!;
    if (++nodes > limits.maxNodes) return `schema has more than ${limits.maxNodes} nodes`;
    if (v === null || typeof v !== 'object') continue;
    if (d > limits.maxDepth) return `schema nested deeper than ${limits.maxDepth} levels`;
    if (Array.isArray(v)) {
      for (const x of v) stack.push({ v: x, d: d + 1 });
      continue;
    }
    const o = v as Record<string, unknown>;
    if (Array.isArray(o.enum) && o.enum.length > limits.maxEnum) return `enum with more than ${limits.maxEnum} values`;
    for (const k in o) stack.push({ v: o[k], d: d + 1 });
  }
  return undefined;
}

/** Nesting depth of a JSON value, stopping early once past `max` (iterative). */
export function depthExceeds(value: unknown, max: number): boolean {
  const stack: { v: unknown; d: number }[] = [{ v: value, d: 1 }];
  while (stack.length) {
    const { v, d } = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d > max) return true;
    if (Array.isArray(v)) for (const x of v) stack.push({ v: x, d: d + 1 });
    else for (const k in v as object) stack.push({ v: (v as Record<string, unknown>)[k], d: d + 1 });
  }
  return false;
}
