import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configExposureProblem } from '../../src/auth/exposure.js';
import { loadConfig, parseConfig } from '../../src/config/load.js';
import { hubConfigSchema } from '../../src/config/schema.js';
import { DEFAULT_INPUT_TIMEOUT_MS } from '../../src/config/types.js';
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

  it("README's configuration reference gives each key the default the hub fills in", () => {
    const md = text('README.md');
    const reference = md.slice(md.indexOf('## Configuration reference'));
    const schema = hubConfigSchema();
    type Node = Record<string, unknown> & { $ref?: string; properties?: Record<string, Node>; additionalProperties?: unknown; default?: unknown };
    const deref = (n: Node | undefined): Node | undefined => {
      let out = n;
      while (out?.$ref) out = out.$ref.replace('#/', '').split('/').reduce<unknown>((t, k) => (t as Record<string, unknown>)[k], schema) as Node;
      return out;
    };
    // `servers.<id>.timeoutMs`: a placeholder segment is any key of a map.
    const at = (path: string): Node | undefined =>
      path.split('.').reduce<Node | undefined>((n, seg) => {
        const here = deref(n);
        if (here?.properties && Object.hasOwn(here.properties, seg)) return here.properties[seg];
        return seg.startsWith('<') && here?.additionalProperties && typeof here.additionalProperties === 'object' ? (here.additionalProperties as Node) : undefined;
      }, schema as Node);
    // Defaults the code sets rather than the schema.
    const inCode: Record<string, unknown> = { 'policy.inputTimeoutMs': DEFAULT_INPUT_TIMEOUT_MS };
    const shown = (v: unknown): string[] => {
      const forms = [`\`${Array.isArray(v) ? JSON.stringify(v) : String(v)}\``];
      if (typeof v === 'number' && v % 1_048_576 === 0) forms.push(`${v / 1_048_576} MiB`);
      if (Array.isArray(v) && v.length === 0) forms.push('none', ''); // no API keys, no args
      return forms;
    };
    const wrong: string[] = [];
    let compared = 0;
    for (const row of reference.split('\n').filter((l) => l.startsWith('| `'))) {
      // Cells split at `|` but not at a `\|` inside one (the redactKeys pattern).
      const [keyCell = '', defaultCell = ''] = row.slice(1).split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
      const names = [...keyCell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
      const defaults = defaultCell.split(' / ').map((d) => d.trim());
      // `listen.maxPendingPerSession` / `drainTimeoutMs`: the later names are siblings of the first.
      const parent = names[0]!.split('.').slice(0, -1).join('.');
      names.forEach((name, i) => {
        const path = name.includes('.') || !parent ? name : `${parent}.${name}`;
        const node = deref(at(path));
        const expected = Object.hasOwn(inCode, path) ? inCode[path] : node?.default;
        if (expected === undefined || (typeof expected === 'object' && !Array.isArray(expected))) return;
        const doc = defaults.length === names.length ? defaults[i]! : defaultCell;
        compared++;
        if (!shown(expected).includes(doc)) wrong.push(`${path}: README says ${doc || '(nothing)'}, the hub's default is ${shown(expected).join(' = ')}`);
      });
    }
    expect(wrong).toEqual([]);
    // The table was read at all: a change of its layout must not pass by comparing nothing.
    expect(compared).toBeGreaterThan(25);
  });
});

describe("README's configuration reference", () => {
  type Node = { $ref?: string; properties?: Record<string, Node>; additionalProperties?: unknown; items?: Node; anyOf?: Node[]; oneOf?: Node[]; allOf?: Node[] };
  const schema = hubConfigSchema() as Node;
  const deref = (n: Node | undefined): Node | undefined => {
    let out = n;
    while (out?.$ref) out = out.$ref.replace('#/', '').split('/').reduce<unknown>((t, k) => (t as Record<string, unknown>)[k], schema) as Node;
    return out;
  };
  /** Every key path of the schema, a map's keys as `<>` (`servers.<>.timeoutMs`); an array's items are the array's. */
  function keyPaths(): string[] {
    const out = new Set<string>();
    const walk = (node: Node | undefined, path: string, depth: number): void => {
      const n = deref(node);
      if (!n || depth > 10) return;
      for (const alt of [...(n.anyOf ?? []), ...(n.oneOf ?? []), ...(n.allOf ?? [])]) walk(alt, path, depth);
      for (const [k, v] of Object.entries(n.properties ?? {})) {
        // `mcpServers` is `servers` under another name (the reference says so once).
        if (k === '$schema' || k === 'mcpServers') continue;
        const p = path ? `${path}.${k}` : k;
        out.add(p);
        walk(v, p, depth + 1);
      }
      if (n.additionalProperties && typeof n.additionalProperties === 'object') walk(n.additionalProperties as Node, `${path}.<>`, depth + 1);
      if (n.items) walk(n.items, path, depth + 1);
    };
    walk(schema, '', 0);
    return [...out];
  }

  it('every key path README.md and docs/*.md name (`servers.<id>.timeoutMs`) is one the schema has', () => {
    // A path segment: a property, or `<id>` for any key of a map; an array's items are the array's.
    const has = (path: string): boolean => {
      let nodes: Node[] = [schema];
      for (const seg of path.split('.')) {
        const next: Node[] = [];
        for (const node of nodes) {
          const n = deref(node)!;
          for (const alt of [n, ...(n.anyOf ?? []), ...(n.oneOf ?? []), ...(n.allOf ?? [])].map(deref)) {
            const here = alt?.items ? deref(alt.items) : alt;
            if (here?.properties && Object.hasOwn(here.properties, seg)) next.push(here.properties[seg]!);
            else if (seg.startsWith('<') && here?.additionalProperties && typeof here.additionalProperties === 'object') next.push(here.additionalProperties as Node);
          }
        }
        if (!next.length) return false;
        nodes = next;
      }
      return true;
    };
    const named = DOCS.flatMap((f) => [...text(f).matchAll(/`((?:listen|ledger|names|servers|groups|plugins|policy|auth)\.[A-Za-z0-9_.<>-]+)`/g)].map((m) => ({ f, path: m[1]!.replace(/\.$/, '') })));
    expect(named.length).toBeGreaterThan(50);
    expect(named.filter(({ path }) => !has(path)).map(({ f, path }) => `${f}: ${path}`)).toEqual([]);
  });

  it('names every key of the schema: a row of its own, or in the row of the key it sits under', () => {
    const md = text('README.md');
    const section = md.slice(md.indexOf('## Configuration reference'));
    const reference = section.slice(0, section.indexOf('\n### '));
    const lines = reference.split('\n');
    const words = (t: string) => new Set((t.match(/`[^`\n]+`/g) ?? []).flatMap((s) => s.split(/[^A-Za-z0-9_$]/)));
    const norm = (p: string) => p.replace(/<[^>]*>/g, '<>');
    const rows: { path: string; words: Set<string> }[] = [];
    for (const row of lines.filter((l) => l.startsWith('| `'))) {
      const names = [...(row.slice(1).split(/(?<!\\)\|/)[0] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
      // `listen.maxPendingPerSession` / `drainTimeoutMs`: the later names are siblings of the first.
      const parent = names[0]!.split('.').slice(0, -1).join('.');
      for (const n of names) rows.push({ path: norm(n.includes('.') || !parent ? n : `${parent}.${n}`), words: words(row) });
    }
    // What the text above the table names (an IDE's `type` and `disabled`, accepted with `mcpServers`).
    const prose = words(lines.filter((l) => !l.startsWith('|')).join('\n'));
    expect(rows.length).toBeGreaterThan(40);
    const missing = keyPaths().filter((p) => {
      if (rows.some((r) => r.path === p || r.path.startsWith(`${p}.`))) return false; // its row, or the rows of its keys
      const last = p.split('.').pop()!;
      const owner = rows.filter((r) => p.startsWith(`${r.path}.`)).sort((a, b) => b.path.length - a.path.length)[0];
      return !(owner ? owner.words.has(last) : prose.has(last));
    });
    expect(missing).toEqual([]);
  });
});

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as `-`, a repeat numbered. */
function anchorsOf(file: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const l of text(file).split('\n')) {
    if (/^\s*```/.test(l)) fenced = !fenced;
    const h = fenced ? null : /^#{1,6}\s+(.*)$/.exec(l);
    if (!h) continue;
    const slug = h[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n ? `${slug}-${n}` : slug);
  }
  return out;
}

describe('links between the docs', () => {
  it('every relative link of README.md and docs/*.md names a file there, and a heading of it when it names one', () => {
    const files = ['README.md', ...readdirSync(join(packageRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    const broken: string[] = [];
    let checked = 0;
    for (const f of files) {
      let fenced = false;
      text(f)
        .split('\n')
        .forEach((l, i) => {
          if (/^\s*```/.test(l)) fenced = !fenced;
          if (fenced) return;
          // Code spans hold text such as `[^](a+)+$`, no link.
          for (const m of l.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
            const target = m[1]!;
            if (/^[a-z][a-z+.-]*:/i.test(target)) continue; // https:, mailto:
            const [file = '', anchor] = target.split('#');
            const path = file ? join(dirname(f), file) : f;
            checked++;
            if (!existsSync(join(packageRoot, path))) broken.push(`${f}:${i + 1}: ${target}: no file ${path}`);
            else if (anchor !== undefined && path.endsWith('.md') && !anchorsOf(path).has(anchor)) broken.push(`${f}:${i + 1}: ${target}: no heading #${anchor} in ${path}`);
          }
        });
    }
    expect(checked).toBeGreaterThan(20);
    expect(broken).toEqual([]);
  });
});

describe('the environment variables', () => {
  /** The TypeScript sources of the hub, its CLI and its bundled plugins. */
  const sources = (dir: string): string[] =>
    readdirSync(join(packageRoot, dir), { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => readFileSync(join(e.parentPath, e.name), 'utf8'));
  const code = [...sources('src'), ...sources('plugins')].join('\n');
  const docs = DOCS.map(text).join('\n');

  it('every one the hub or the CLI reads is named in README.md or docs/*.md', () => {
    const read = new Set([
      ...[...code.matchAll(/process\.env(?:\.([A-Za-z_]\w*)|\[\s*['"](\w+)['"]\s*\])/g)].map((m) => (m[1] ?? m[2])!),
      ...[...code.matchAll(/envMs\(\s*'(\w+)'/g)].map((m) => m[1]!),
      // Named through a constant, or a prefix the rest is appended to (`SWITCHYARD_INPUT_<ID>`).
      ...[...code.matchAll(/['"`](SWITCHYARD_\w+)/g)].map((m) => m[1]!),
    ]);
    // One the hub sets itself, around a library's call, is no setting of the user's.
    for (const name of [...read]) if (new RegExp(`process\\.env\\.${name}\\s*=[^=]`).test(code)) read.delete(name);
    expect(read.size).toBeGreaterThan(10);
    expect([...read].filter((name) => !new RegExp(`(?<![\\w])${name}`).test(docs))).toEqual([]);
  });

  it("README's table gives each duration the default the code falls back to", () => {
    // envMs('NAME', 3_000) or envMs('NAME', CONST) with `const CONST = 3_000` in the same file.
    const files = [...sources('src'), ...sources('plugins')];
    const defaults = new Map<string, number>();
    for (const file of files)
      for (const m of file.matchAll(/envMs\(\s*(?:'(\w+)'|(\w+))\s*,\s*([\w.]+)/g)) {
        const name = m[1] ?? new RegExp(`const ${m[2]} = '(\\w+)'`).exec(file)?.[1];
        const raw = /^[\d_]+$/.test(m[3]!) ? m[3]! : new RegExp(`const ${m[3]} = ([\\d_]+);`).exec(file)?.[1];
        expect(name && raw, m[0]).toBeTruthy();
        defaults.set(name!, Number(raw!.replace(/_/g, '')));
      }
    expect(defaults.size).toBeGreaterThan(4);
    const readme = text('README.md');
    const wrong = [...defaults].filter(([name, ms]) => !readme.includes(`| \`${name}\` | \`${ms}\` |`)).map(([name, ms]) => `${name}: ${ms}`);
    expect(wrong).toEqual([]);
  });

  it('every SWITCHYARD_ one README.md and docs/*.md name is one the source has', () => {
    const named = new Set([...docs.matchAll(/SWITCHYARD_\w+/g)].map((m) => m[0]));
    expect(named.size).toBeGreaterThan(10);
    // `SWITCHYARD_INPUT_GH_TOKEN` is an instance of the prefix `SWITCHYARD_INPUT_` the source appends to.
    expect([...named].filter((name) => ![...code.matchAll(/SWITCHYARD_\w+/g)].some((m) => name === m[0] || (m[0].endsWith('_') && name.startsWith(m[0]))))).toEqual([]);
  });
});

describe('what an operator scrapes and asks', () => {
  const docs = DOCS.map(text).join('\n');
  // `switchyard_cache_{hits,misses,stale_served}_total`: each name the braces give.
  const expanded = docs.replace(/([\w/]*)\{([\w,]+)\}([\w/]*)/g, (_m, pre: string, alts: string, post: string) => alts.split(',').map((a) => `${pre}${a}${post}`).join(' '));

  it('every metric the hub registers is named in README.md or docs/*.md', () => {
    const src = text('src/metrics.ts');
    const names = [...new Set([...src.matchAll(/'(switchyard_[a-z_]+[a-z])'/g)].map((m) => m[1]!))];
    expect(names.length).toBeGreaterThan(15);
    expect(names.filter((n) => !new RegExp(`(?<!\\w)${n}(?!\\w)`).test(expanded))).toEqual([]);
  });

  it('every operator route the hub answers is named in README.md or docs/*.md', () => {
    const src = text('src/downstream/admin.ts') + text('src/downstream/http-server.ts');
    // The routes it matches by name (`path === '/admin/reload'`, `case '/metrics':`), and the restart's pattern.
    const routes = [...new Set([...src.matchAll(/(?:path === |case )'(\/(?:admin|metrics|healthz)[^']*)'/g)].map((m) => m[1]!))];
    expect(routes).toContain('/admin/ticket');
    expect(routes.length).toBeGreaterThan(8);
    const restart = /\/admin\/servers\/<id>\/restart/.test(docs) && src.includes('/^\\/admin\\/servers\\/([^/]+)\\/restart$/');
    expect(restart).toBe(true);
    expect(routes.filter((r) => !new RegExp(`${r.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}(?![\\w/-])`).test(docs))).toEqual([]);
  });
});
