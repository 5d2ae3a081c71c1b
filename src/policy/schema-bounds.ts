/**
 * Cheap structural bounds on a tool's JSON Schema, checked before ajv ever sees it: ajv's
 * compile time grows with the size of the schema, so bounding size, depth, node and object
 * counts bounds the compile (a hostile upstream cannot stall the hub with one tools/list).
 */
export interface SchemaLimits {
  /** Serialised size in bytes. */
  maxBytes: number;
  /** Nesting of objects and arrays. */
  maxDepth: number;
  /** Objects, arrays and values together. */
  maxNodes: number;
  /**
   * Objects (subschemas, and maps such as `properties`): ajv, reporting the first error, nests
   * the code of each check in the one before, so its compile recurses as deep as the schema has
   * subschemas in all. 3,000 one-keyword properties (well within the other bounds) took 12 s
   * to overflow its stack, and the tool was quarantined as a `$ref` loop.
   */
  maxObjects: number;
  /** Entries of one `enum`. */
  maxEnum: number;
  /**
   * Nodes once every local `$ref` is read as what it points to (a recursive one once): what a
   * value that fails may be checked against. A few hundred bytes of `anyOf`s of two `$ref`s to
   * the next definition reach 2^n (digest §3.4: limit the subschemas composition evaluates).
   */
  maxExpandedNodes: number;
}

export const DEFAULT_SCHEMA_LIMITS: SchemaLimits = { maxBytes: 256 * 1024, maxDepth: 48, maxNodes: 20_000, maxObjects: 1_000, maxEnum: 5_000, maxExpandedNodes: 50_000 };

/** `$ref` hops followed in one chain before the schema is refused (a stack bound for the count). */
const MAX_REF_CHAIN = 256;

/** Why the schema is out of bounds, or undefined. Iterative: a deep schema cannot overflow the stack here. */
export function schemaOutOfBounds(schema: unknown, serialised: string, limits: SchemaLimits = DEFAULT_SCHEMA_LIMITS): string | undefined {
  if (Buffer.byteLength(serialised) > limits.maxBytes) return `schema larger than ${limits.maxBytes} bytes`;
  const stack: { v: unknown; d: number }[] = [{ v: schema, d: 1 }];
  let nodes = 0;
  let objects = 0;
  while (stack.length) {
    const { v, d } = stack.pop()!;
    if (++nodes > limits.maxNodes) return `schema has more than ${limits.maxNodes} nodes`;
    if (v === null || typeof v !== 'object') continue;
    if (d > limits.maxDepth) return `schema nested deeper than ${limits.maxDepth} levels`;
    if (Array.isArray(v)) {
      for (const x of v) stack.push({ v: x, d: d + 1 });
      continue;
    }
    if (++objects > limits.maxObjects) return `schema has more than ${limits.maxObjects} objects (subschemas and maps of them)`;
    const o = v as Record<string, unknown>;
    if (Array.isArray(o.enum) && o.enum.length > limits.maxEnum) return `enum with more than ${limits.maxEnum} values`;
    for (const k in o) stack.push({ v: o[k], d: d + 1 });
  }
  return refExpansionProblem(schema, limits.maxExpandedNodes);
}

/** The value a local JSON pointer (`#`, `#/a/b`) names in `root`, or undefined. */
function pointed(root: unknown, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined; // $id, anchors, other documents: ajv's to resolve or refuse
  let v: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    let t: string;
    try {
      t = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    if (v === null || typeof v !== 'object' || !Object.prototype.hasOwnProperty.call(v, t)) return undefined;
    v = (v as Record<string, unknown>)[t];
  }
  return v;
}

/**
 * Why the schema grows past `max` nodes once its local `$ref`s are read in place, or undefined.
 * Linear in the schema: each subschema's size is counted once and reused; a `$ref` back into a
 * subschema being counted (recursion, bounded by the data's own depth) counts as one node.
 */
function refExpansionProblem(schema: unknown, max: number): string | undefined {
  const memo = new Map<object, number>();
  const open = new Set<object>();
  let chain = 0;
  const size = (v: unknown): number => {
    if (v === null || typeof v !== 'object') return 1;
    const known = memo.get(v);
    if (known !== undefined) return known;
    if (open.has(v)) return 1;
    open.add(v);
    let n = 1;
    if (Array.isArray(v)) {
      for (const x of v) if ((n += size(x)) > max) break;
    } else {
      const o = v as Record<string, unknown>;
      for (const k in o) if ((n += size(o[k])) > max) break;
      const target = typeof o.$ref === 'string' && n <= max ? pointed(schema, o.$ref) : undefined;
      if (target !== null && typeof target === 'object') {
        if (++chain > MAX_REF_CHAIN) throw new RefChainError();
        n += size(target);
        chain--;
      }
    }
    open.delete(v);
    n = Math.min(n, max + 1);
    memo.set(v, n);
    return n;
  };
  try {
    return size(schema) > max ? `schema expands to more than ${max} nodes through its $refs` : undefined;
  } catch (err) {
    if (err instanceof RefChainError) return `schema chains more than ${MAX_REF_CHAIN} $refs`;
    // $ref hops times nesting deeper than the stack: no schema a tool needs.
    if (err instanceof RangeError) return 'schema nests too deeply through its $refs';
    throw err;
  }
}

class RefChainError extends Error {}

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
