/**
 * The shape every client reads a listed tool's schemas in (digest §3.4): `inputSchema` an object
 * with `type: "object"`, `outputSchema` (when there is one) an object, and at the root of either
 * `properties` a map of schemas and `required` a list of names. The SDK clients parse a tools/list answer
 * whole: one tool of any upstream that breaks this fails the whole list for them, every other
 * server's tools with it. Whether a schema of this shape is also valid JSON Schema is the
 * validator's question, asked when the tool is called (policy/validate.ts).
 */
function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function rootProblem(field: string, schema: Record<string, unknown>): string | null {
  if (schema.properties !== undefined && !isMap(schema.properties)) return `its ${field}.properties is not an object`;
  // A schema is an object or a boolean (booleans are spelt as objects for legacy clients,
  // downstream/results.ts); null or a string there failed the v1 SDK client's whole list.
  for (const [name, p] of Object.entries(schema.properties ?? {}))
    if (!isMap(p) && typeof p !== 'boolean') return `its ${field}.properties[${JSON.stringify(name.slice(0, 64))}] is not a schema`;
  const req = schema.required;
  if (req !== undefined && !(Array.isArray(req) && req.every((r) => typeof r === 'string'))) return `its ${field}.required is not a list of names`;
  return null;
}

/** Why no client could read this tool's schemas, or null. */
export function toolSchemaProblem(tool: Record<string, unknown>): string | null {
  const input = tool.inputSchema;
  if (!isMap(input)) return `its inputSchema is ${input === undefined ? 'missing' : 'not an object'}`;
  if (input.type !== 'object') return `its inputSchema has type ${JSON.stringify(input.type ?? null)}, not "object"`;
  const inputProblem = rootProblem('inputSchema', input);
  if (inputProblem) return inputProblem;
  const output = tool.outputSchema;
  // null is unsaid (servers that write every field): left out of what clients get (item-shape.ts).
  if (output === undefined || output === null) return null;
  if (!isMap(output)) return 'its outputSchema is not an object';
  return rootProblem('outputSchema', output);
}
