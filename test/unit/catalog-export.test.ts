/**
 * Function-calling export: tricky schemas (optional fields, nested objects, oneOf, refs, type
 * unions, allOf) become OpenAI strict-mode schemas, checked by an independent strict-mode
 * validator and by ajv against example arguments; schemas that cannot be strict are listed
 * with a reason.
 */
import { describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { toAnthropic, toOpenAi, toStrictSchema, type StrictOk } from '../../src/catalog/export.js';
import { exportNotes } from '../../src/cli/tools-export.js';

type Json = Record<string, any>;

const ALLOWED = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'enum',
  'anyOf',
  'description',
  '$ref',
  '$defs',
  'definitions',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minItems',
  'maxItems',
]);

/** OpenAI strict-mode rules, written independently of the converter. */
function strictProblems(root: Json): string[] {
  const problems: string[] = [];
  if (root.type !== 'object') problems.push('root is not type object');
  if (root.anyOf) problems.push('root is a union');
  const resolve = (ref: string) => ref.replace(/^#\//, '').split('/').reduce((n: any, k) => n?.[k], root);
  const walk = (s: any, at: string, depth: number): void => {
    if (typeof s !== 'object' || s === null || Array.isArray(s)) return void problems.push(`${at}: not a schema object`);
    for (const k of Object.keys(s)) if (!ALLOWED.has(k)) problems.push(`${at}: keyword ${k} not allowed`);
    if (s.$ref) {
      if (resolve(s.$ref) === undefined) problems.push(`${at}: $ref ${s.$ref} unresolved`);
      return;
    }
    if (s.anyOf) return s.anyOf.forEach((b: any, i: number) => walk(b, `${at}/anyOf/${i}`, depth));
    const types = s.type === undefined ? [] : [s.type].flat();
    if (!types.length && !s.enum) problems.push(`${at}: no type`);
    if (types.includes('object')) {
      if (depth > 10) problems.push(`${at}: too deep`);
      if (s.additionalProperties !== false) problems.push(`${at}: additionalProperties is not false`);
      const keys = Object.keys(s.properties ?? {});
      if (JSON.stringify([...(s.required ?? [])].sort()) !== JSON.stringify([...keys].sort())) problems.push(`${at}: required is not every property`);
      for (const k of keys) walk(s.properties[k], `${at}/properties/${k}`, depth + 1);
    }
    if (types.includes('array')) {
      if (typeof s.items !== 'object' || Array.isArray(s.items)) problems.push(`${at}: array items missing`);
      else walk(s.items, `${at}/items`, depth + 1);
    }
  };
  walk(root, '', 0);
  for (const defs of [root.$defs, root.definitions]) for (const [k, v] of Object.entries(defs ?? {})) walk(v, `/$defs/${k}`, 1);
  return problems;
}

const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });

/** The converted schema must pass the strict rules and accept the given arguments. */
function expectStrict(input: Json, accepts: Json[], rejects: Json[] = []): Json {
  const r = toStrictSchema(input);
  if (!r.ok) throw new Error(`not strict: ${r.reason}`);
  expect(strictProblems(r.schema)).toEqual([]);
  const validate = ajv.compile(r.schema);
  for (const a of accepts) expect(validate(a), `${JSON.stringify(a)}: ${JSON.stringify(validate.errors)}`).toBe(true);
  for (const a of rejects) expect(validate(a), JSON.stringify(a)).toBe(false);
  return r;
}

describe('OpenAI strict-mode conversion', () => {
  it('makes optional fields required and nullable', () => {
    const r = expectStrict(
      {
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: { q: { type: 'string', minLength: 1 }, limit: { type: 'integer', minimum: 1, default: 10 }, mode: { type: 'string', enum: ['fast', 'exact'] } },
        required: ['q'],
        additionalProperties: false,
      },
      [
        { q: 'x', limit: null, mode: null },
        { q: 'x', limit: 5, mode: 'fast' },
      ],
      [{ q: 'x' }, { q: 'x', limit: 0, mode: null }, { q: 'x', limit: null, mode: 'slow' }, { q: 'x', limit: null, mode: null, extra: 1 }],
    );
    expect(r.schema.properties.limit).toEqual({ type: ['integer', 'null'], minimum: 1 });
    expect(r.schema.properties.mode).toEqual({ type: ['string', 'null'], enum: ['fast', 'exact', null] });
    expect(r.nullable).toEqual(['/properties/limit', '/properties/mode']);
    expect(r.loosened).toContain('/properties/q: "minLength" dropped');
  });

  it('keeps null in a required nullable property', () => {
    const r = expectStrict(
      { type: 'object', properties: { note: { type: ['string', 'null'] } }, required: ['note'] },
      [{ note: null }, { note: 'n' }],
      [{ note: 1 }],
    );
    expect(r.schema.properties.note).toEqual({ type: ['string', 'null'] });
    expect(r.nullable).toEqual([]);
  });

  it('an allOf branch or $defs entry named __proto__ or constructor is data too: merged, not refused or lost', () => {
    const r = toStrictSchema(
      JSON.parse(
        '{"type": "object", "properties": {"a": {"type": "string"}}, "allOf": [{"properties": {"__proto__": {"type": "string"}, "constructor": {"type": "integer"}}}], "$defs": {"__proto__": {"type": "string"}}}',
      ),
    );
    expect(r.ok, JSON.stringify(r)).toBe(true);
    const schema = (r as StrictOk).schema as { properties: object; $defs: object };
    expect(Object.keys(schema.properties)).toEqual(['a', '__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(schema.properties, 'constructor')?.value).toMatchObject({ type: ['integer', 'null'] });
    expect(Object.getOwnPropertyDescriptor(schema.$defs, '__proto__')?.value).toEqual({ type: 'string' });
  });

  it('keeps a property named __proto__ (as data, listed in required)', () => {
    const r = toStrictSchema(JSON.parse('{"type": "object", "properties": {"__proto__": {"type": "string"}, "b": {"type": "string"}}, "required": ["__proto__", "b"]}'));
    const props = (r as StrictOk).schema.properties as Record<string, unknown>;
    expect(Object.keys(props)).toEqual(['__proto__', 'b']);
    expect(Object.getOwnPropertyDescriptor(props, '__proto__')?.value).toEqual({ type: 'string' });
    expect((r as StrictOk).schema.required).toEqual(['__proto__', 'b']);
  });

  it('closes nested objects at every level', () => {
    expectStrict(
      {
        type: 'object',
        properties: {
          user: {
            type: 'object',
            properties: {
              name: { type: 'string' },
              address: { type: 'object', properties: { city: { type: 'string' }, zip: { type: 'string', pattern: '^[0-9]{5}$' } }, required: ['city'] },
              tags: { type: 'array', items: { type: 'object', properties: { k: { type: 'string' }, v: { type: 'string' } }, required: ['k'] } },
            },
            required: ['name'],
          },
        },
        required: ['user'],
      },
      [
        { user: { name: 'a', address: null, tags: null } },
        { user: { name: 'a', address: { city: 'b', zip: '12345' }, tags: [{ k: 'x', v: null }] } },
      ],
      [{ user: { name: 'a', address: { city: 'b', zip: 'nope' }, tags: null } }, { user: { name: 'a', address: null, tags: [{ k: 'x' }] } }],
    );
  });

  it('turns oneOf into anyOf, keeping each branch strict', () => {
    const r = expectStrict(
      {
        type: 'object',
        properties: {
          target: {
            description: 'what to open',
            oneOf: [
              { type: 'object', properties: { kind: { const: 'file' }, path: { type: 'string' } }, required: ['kind', 'path'] },
              { type: 'object', properties: { kind: { const: 'url' }, href: { type: 'string', format: 'uri' } }, required: ['kind', 'href'] },
            ],
          },
          fallback: { oneOf: [{ type: 'string' }, { type: 'number' }] },
        },
        required: ['target'],
      },
      [
        { target: { kind: 'file', path: '/a' }, fallback: null },
        { target: { kind: 'url', href: 'http://x' }, fallback: 3 },
      ],
      [{ target: { kind: 'file', href: 'http://x' }, fallback: null }],
    );
    expect(r.schema.properties.target.description).toBe('what to open');
    expect(r.schema.properties.fallback.anyOf).toContainEqual({ type: 'null' });
    expect(r.loosened).toContain('/properties/target: oneOf read as anyOf');
  });

  it('keeps local $refs (recursive ones too) and converts the definitions', () => {
    const r = expectStrict(
      {
        type: 'object',
        properties: { root: { $ref: '#/$defs/node' }, extra: { $ref: '#/$defs/leaf' } },
        required: ['root'],
        $defs: {
          node: { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/node' } } }, required: ['name'] },
          leaf: { type: 'string' },
        },
      },
      [{ root: { name: 'a', children: [{ name: 'b', children: null }] }, extra: null }],
      [{ root: { name: 'a', children: [{ name: 'b' }] }, extra: null }],
    );
    expect(r.schema.properties.extra).toEqual({ anyOf: [{ $ref: '#/$defs/leaf' }, { type: 'null' }] });
  });

  it('splits type unions and flattens allOf of objects', () => {
    expectStrict(
      {
        type: 'object',
        properties: { id: { type: ['string', 'integer'] }, note: { type: ['string', 'null'] } },
        allOf: [{ properties: { when: { type: 'string', format: 'date-time' } }, required: ['when'] }],
        required: ['id'],
      },
      [
        { id: 'a', note: null, when: '2026-01-01T00:00:00Z' },
        { id: 3, note: 'n', when: '2026-01-01T00:00:00Z' },
      ],
      [{ id: true, note: null, when: 'x' }],
    );
  });

  it('accepts a tool without arguments', () => {
    expectStrict({ type: 'object' }, [{}], [{ a: 1 }]);
    expectStrict({ type: 'object', properties: {} }, [{}]);
  });

  it.each([
    ['a free-form nested object', { type: 'object', properties: { meta: { type: 'object' } } }, /free-form object/],
    ['a map of strings', { type: 'object', properties: { env: { type: 'object', additionalProperties: { type: 'string' } } } }, /free-form object/],
    ['a root that is only a map', { type: 'object', additionalProperties: { type: 'number' } }, /free-form object/],
    ['a tuple', { type: 'object', properties: { pt: { type: 'array', items: [{ type: 'number' }, { type: 'number' }] } } }, /tuple/],
    ['an untyped property', { type: 'object', properties: { x: {} } }, /any value/],
    ['a union at the root', { anyOf: [{ type: 'object' }, { type: 'string' }] }, /root is a union/],
    ['a non-object root', { type: 'string' }, /root must be an object/],
    ['a remote $ref', { type: 'object', properties: { x: { $ref: 'https://example.com/s.json' } } }, /another document/],
    ['a dangling $ref', { type: 'object', properties: { x: { $ref: '#/$defs/missing' } } }, /points nowhere/],
    ['an array without items', { type: 'object', properties: { xs: { type: 'array' } } }, /without an items/],
  ])('reports %s as not strict, with the reason', (_label, schema, reason) => {
    const r = toStrictSchema(schema);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(reason);
  });

  it('bounds nesting depth', () => {
    let s: Json = { type: 'object', properties: { leaf: { type: 'string' } }, required: ['leaf'] };
    for (let i = 0; i < 12; i++) s = { type: 'object', properties: { n: s }, required: ['n'] };
    const r = toStrictSchema(s);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(/deeper than 10/);
  });
});

describe('toOpenAi / toAnthropic', () => {
  const tools = [
    { name: 'files__read', description: 'Read a file', inputSchema: { type: 'object', properties: { path: { type: 'string', minLength: 1 }, encoding: { type: 'string' } }, required: ['path'] } },
    { name: 'kv__put', description: 'Store values', inputSchema: { type: 'object', properties: { values: { type: 'object', additionalProperties: true } }, required: ['values'] } },
    { name: 'odd.name', inputSchema: { type: 'object', properties: {} } },
  ];

  it('exports strict functions where possible and lists the rest with reasons', () => {
    const out = toOpenAi(tools);
    expect(out.format).toBe('openai');
    expect(out.tools.map((t) => [t.function.name, t.function.strict])).toEqual([
      ['files__read', true],
      ['kv__put', false],
    ]);
    const read = out.tools[0].function;
    expect(read).toMatchObject({ name: 'files__read', description: 'Read a file' });
    expect(strictProblems(read.parameters)).toEqual([]);
    expect(out.nullable).toEqual({ files__read: ['/properties/encoding'] });
    // What strict mode cost a strict tool's schema is said per tool (the hub still checks it).
    expect(out.loosened).toEqual({ files__read: ['/properties/path: "minLength" dropped'] });
    expect(out.notStrict).toEqual([{ name: 'kv__put', reason: expect.stringMatching(/free-form object/) }]);
    // The API refuses a request whose function names break its pattern, strict or not: left out.
    expect(out.skipped).toEqual([{ name: 'odd.name', reason: expect.stringMatching(/does not match/) }]);
    // Non-strict tools still carry their schema as given.
    expect(out.tools[1].function.parameters).toEqual(tools[1].inputSchema);
    // Said on stderr by `tools export`, counted in words that fit one ("1 tool", it said "1 tool(s)"),
    // each line a note of the command's (it was a bare line, whose in a log of several commands?).
    expect(exportNotes(out, 'tools export')).toBe(
      'switchyard tools export: note: 1 tool could not be made strict; see "notStrict"\n' +
        'switchyard tools export: note: 1 strict tool lost constraints the API does not take (the hub still checks them); see "loosened"\n' +
        'switchyard tools export: note: 1 tool left out: the API refuses their names; see "skipped"\n',
    );
  });

  it('OpenAI: a tool named __proto__ (an upstream name without a prefix) is said in nullable and loosened like any other', () => {
    const out = toOpenAi([{ ...tools[0]!, name: '__proto__' }, { ...tools[0]!, name: 'constructor' }]);
    expect(JSON.parse(JSON.stringify(out.nullable))).toEqual(JSON.parse('{"__proto__":["/properties/encoding"],"constructor":["/properties/encoding"]}'));
    expect(Object.keys(out.loosened)).toEqual(['__proto__', 'constructor']);
    expect(Object.getPrototypeOf(out.nullable)).toBe(Object.prototype);
  });

  it('OpenAI: a name over 64 characters (names.mode "spec") is left out too, whatever its schema', () => {
    const long = `s__${'a'.repeat(62)}`;
    const out = toOpenAi([{ name: long, inputSchema: { type: 'object', properties: {} } }, tools[0]!]);
    expect(out.tools.map((t) => t.function.name)).toEqual(['files__read']);
    expect(out.skipped).toEqual([{ name: long, reason: expect.stringMatching(/does not match/) }]);
  });

  it('exports Anthropic tools with input_schema, skipping names the API refuses', () => {
    const out = toAnthropic([{ name: 'a__b', description: 'd', inputSchema: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { x: { type: 'number' } } } }, tools[2]]);
    expect(out.tools).toEqual([{ name: 'a__b', description: 'd', input_schema: { type: 'object', properties: { x: { type: 'number' } } } }]);
    expect(out.skipped).toEqual([{ name: 'odd.name', reason: expect.any(String) }]);
    expect(out.loosened).toEqual([]);
  });

  it('Anthropic: a root anyOf/oneOf/allOf (which the API refuses at the root) is dropped and said so', () => {
    const either = { type: 'object', properties: { id: { type: 'string' }, path: { type: 'string' } }, oneOf: [{ required: ['id'] }, { required: ['path'] }] };
    const out = toAnthropic([{ name: 'f__get', inputSchema: either }]);
    expect(out.tools[0]!.input_schema).toEqual({ type: 'object', properties: { id: { type: 'string' }, path: { type: 'string' } } });
    expect(out.loosened).toEqual([{ name: 'f__get', reason: expect.stringMatching(/^root "oneOf" dropped/) }]);
  });
});

describe('strict schemas that would change meaning or break the API rules', () => {
  it('a root $ref, or a $ref with keywords beside it, is not made strict (the siblings would be lost)', () => {
    const root = toStrictSchema({ type: 'object', $ref: '#/$defs/Args', $defs: { Args: { type: 'object', properties: { a: { type: 'string' } } } } });
    expect(root).toMatchObject({ ok: false, reason: expect.stringMatching(/root is a \$ref/) });
    const beside = toStrictSchema({ type: 'object', properties: { box: { $ref: '#/$defs/Base', properties: { size: { type: 'number' } }, required: ['size'] } }, $defs: { Base: { type: 'object', properties: { id: { type: 'string' } } } } });
    expect(beside).toMatchObject({ ok: false, reason: expect.stringMatching(/\/properties\/box: \$ref with "properties", "required" beside it/) });
    // A plain $ref (a description beside it is fine) still is.
    const plain = toStrictSchema({ type: 'object', properties: { box: { $ref: '#/$defs/Base', description: 'the box' } }, $defs: { Base: { type: 'object', properties: { id: { type: 'string' } } } } });
    expect(plain.ok).toBe(true);
  });

  it('counts enum values as sent: an optional property of 1,000 values gains a null and is one too many', () => {
    const values = Array.from({ length: 1000 }, (_, i) => `v${i}`);
    expect(toStrictSchema({ type: 'object', properties: { e: { type: 'string', enum: values } }, required: ['e'] }).ok).toBe(true);
    expect(toStrictSchema({ type: 'object', properties: { e: { type: 'string', enum: values } } })).toMatchObject({ ok: false, reason: 'more than 1000 enum values in total' });
  });
});
