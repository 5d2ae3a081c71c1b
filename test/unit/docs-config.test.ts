import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configExposureProblem } from '../../src/auth/exposure.js';
import { loadConfig, parseConfig } from '../../src/config/load.js';
import { hubConfigSchema } from '../../src/config/schema.js';
import { packageRoot } from '../../src/paths.js';

/**
 * What a new user copies: the shipped hub.config.json (`npm start` serves it) and the hub
 * configs shown in README.md and docs/*.md. A config key renamed or tightened without the docs
 * following would make a copied example fail at start; a key added without a word in the docs
 * would be one a user cannot find.
 */

const DOCS = ['README.md', ...readdirSync(join(packageRoot, 'docs')).filter((f) => f.endsWith('.md') && f !== 'BENCHMARKS.md').map((f) => `docs/${f}`)];
const text = (f: string) => readFileSync(join(packageRoot, f), 'utf8');

/** The fenced ```json blocks of a Markdown file that parse as JSON objects, with their line. */
function jsonBlocks(file: string): { line: number; value: Record<string, unknown> }[] {
  const out: { line: number; value: Record<string, unknown> }[] = [];
  let lang: string | undefined;
  let start = 0;
  let body: string[] = [];
  text(file)
    .split('\n')
    .forEach((l, i) => {
      const fence = /^\s*```(\S*)/.exec(l);
      if (!fence) {
        if (lang !== undefined) body.push(l);
        return;
      }
      if (lang === undefined) {
        [lang, start, body] = [fence[1]!, i + 1, []];
        return;
      }
      if (lang.startsWith('json')) {
        try {
          const v: unknown = JSON.parse(body.join('\n'));
          if (v && typeof v === 'object' && !Array.isArray(v)) out.push({ line: start, value: v as Record<string, unknown> });
        } catch {
          // a fragment (`"plugins": {…}`), not a whole file
        }
      }
      lang = undefined;
    });
  return out;
}

/** A client's config pointing at Switchyard (VS Code, Cursor, Cline…), not a hub config. */
function isClientConfig(v: Record<string, unknown>): boolean {
  const servers = (v.servers ?? v.mcpServers) as Record<string, unknown> | undefined;
  return 'inputs' in v || (servers !== undefined && 'switchyard' in servers);
}

/** Every variable a block interpolates is set, to a value long enough to pass as a secret. */
const value = (k: string): string => `value-of-${k}-0123456789`;
// Its own variables, as the loader reads only those (a variable named toString is not Object's).
const ANY_ENV = new Proxy(
  {},
  {
    get: (_t, k) => (typeof k === 'string' ? value(k) : undefined),
    getOwnPropertyDescriptor: (_t, k) => (typeof k === 'string' ? { value: value(k), writable: true, enumerable: true, configurable: true } : undefined),
  },
) as Record<string, string>;

describe('the configs a user copies', () => {
  it('the shipped hub.config.json is valid, serves on loopback and runs the two examples', () => {
    const c = loadConfig(join(packageRoot, 'hub.config.json'));
    expect(configExposureProblem(c)).toBeUndefined();
    expect(Object.keys(c.servers)).toEqual(['notes', 'clock']);
    expect(c.servers.notes!.args).toEqual(['examples/legacy-notes.mjs']);
    expect(c.servers.clock!.args).toEqual(['examples/modern-clock.mjs']);
  });

  it('every hub config shown in README.md and docs/*.md is valid', () => {
    const blocks = DOCS.flatMap((f) => jsonBlocks(f).filter((b) => !isClientConfig(b.value)).map((b) => ({ where: `${f}:${b.line}`, value: b.value })));
    expect(blocks.length).toBeGreaterThan(5);
    const bad = blocks.flatMap(({ where, value }) => {
      try {
        const c = parseConfig(value, join(packageRoot, 'hub.config.json'), ANY_ENV);
        const exposed = configExposureProblem(c);
        return exposed ? [`${where}: ${exposed}`] : [];
      } catch (e) {
        return [`${where}: ${(e as Error).message}`];
      }
    });
    expect(bad).toEqual([]);
  });

  it('every key of the schema is named in README.md or docs/*.md', () => {
    const docs = DOCS.map(text).join('\n');
    const keys = new Set<string>();
    const walk = (node: unknown): void => {
      if (!node || typeof node !== 'object') return;
      for (const [k, v] of Object.entries(node as Record<string, unknown>)) {
        if (k === 'properties' && v && typeof v === 'object') for (const name of Object.keys(v)) keys.add(name);
        walk(v);
      }
    };
    walk(hubConfigSchema());
    keys.delete('$schema');
    // Named as a word in a code span (`servers.<id>.era`, `readOnlyHint: true`) or as a key of a JSON example.
    const spans = docs.match(/`[^`\n]+`/g) ?? [];
    const named = (k: string) => docs.includes(`"${k}"`) || spans.some((s) => s.split(/[^A-Za-z0-9_$]/).includes(k));
    expect([...keys].filter((k) => !named(k))).toEqual([]);
  });
});
