import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hubConfigSchema, schemaFile, SCHEMA_RELATIVE_PATH } from '../../src/config/schema.js';
import { packageRoot } from '../../src/paths.js';

/** Every `properties` entry anywhere in the schema, with its JSON Pointer. */
function propertiesOf(node: unknown, at = '#'): [string, Record<string, unknown>][] {
  if (node === null || typeof node !== 'object') return [];
  const out: [string, Record<string, unknown>][] = [];
  const obj = node as Record<string, unknown>;
  for (const [k, v] of Object.entries(obj)) {
    if (k === 'properties' && v && typeof v === 'object') {
      for (const [name, sub] of Object.entries(v)) out.push([`${at}/properties/${name}`, sub as Record<string, unknown>]);
    }
    out.push(...propertiesOf(v, `${at}/${k}`));
  }
  return out;
}

describe('hub.config.schema.json', () => {
  it('is the file shipped at src/config/, found from the package root', () => {
    expect(schemaFile()).toBe(join(packageRoot, SCHEMA_RELATIVE_PATH));
    expect(hubConfigSchema()).toEqual(JSON.parse(readFileSync(join(packageRoot, 'src/config/hub.config.schema.json'), 'utf8')));
    expect(hubConfigSchema().$schema).toBe('https://json-schema.org/draft/2020-12/schema');
  });

  it('describes every property, so editors can explain each key', () => {
    const props = propertiesOf(hubConfigSchema());
    expect(props.length).toBeGreaterThan(40);
    const undescribed = props
      // `servers.<id>.type` inside if/then are conditions, not declarations
      .filter(([path]) => !/\/(if|then)\//.test(path))
      .filter(([, sub]) => typeof sub.description !== 'string' || sub.description.length < 8)
      .map(([path]) => path);
    expect(undescribed).toEqual([]);
  });
});
