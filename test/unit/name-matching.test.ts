/**
 * Tool-name globs (policy, filters, groups) and resource templates (routing a read) match
 * what a regular expression of them would, in time linear in the name: names come from
 * clients and upstreams, templates from upstreams, and a backtracking matcher stalls the hub.
 * The hostile inputs run in a worker of the built code, so a matcher that backtracks fails the
 * test at its deadline instead of freezing the test run.
 */
import fc from 'fast-check';
import { resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { MAX_TEMPLATE_LENGTH, templateMatcher } from '../../src/catalog/uri-template.js';
import { compileGlob, globMatcher } from '../../src/policy/glob.js';

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/** The regular expression a glob stands for (a fine oracle for short names). */
const globOracle = (glob: string): RegExp => new RegExp(`^${[...glob].map((c) => (c === '*' ? '.*' : c === '?' ? '.' : escape(c))).join('')}$`, 's');

/** The regular expression a template stands for (see uri-template.ts's header). */
function templateOracle(template: string): RegExp {
  const src = template.replace(/\{([^}]*)\}|[^{]+/g, (whole, expr: string | undefined) => {
    if (expr === undefined) return escape(whole);
    const op = expr[0];
    if (op === '?' || op === '&') return '(?:[?&].*)?';
    if (op === '+' || op === '#' || op === '/' || op === '.' || op === ';') return '.*';
    return '[^/?#]+';
  });
  return new RegExp(`^${src}$`, 's');
}

const text = (chars: string[], maxLength: number) => fc.array(fc.constantFrom(...chars), { maxLength }).map((a) => a.join(''));

describe('globs', () => {
  it('match exactly what their regular expression matches', () => {
    fc.assert(
      fc.property(text(['a', 'b', '_', '.', '*', '?'], 8), text(['a', 'b', '_', '.', '\n'], 12), (glob, name) => {
        expect(compileGlob(glob)(name)).toBe(globOracle(glob).test(name));
      }),
      { numRuns: 5_000 },
    );
  });

  it.each([
    ['', '', true],
    ['', 'a', false],
    ['*', '', true],
    ['**', 'abc', true],
    ['a*a', 'a', false], // head and tail may not share the one "a"
    ['a*a', 'aa', true],
    ['?*', '', false],
    ['*?', 'x', true],
    ['a*b*c', 'abxbc', true],
    ['a*b*c', 'acb', false],
    ['?', '😀', false], // "?" is one UTF-16 unit, as "." was
    ['??', '😀', true],
    ['fs__*', 'xfs__read', false],
  ])('%j against %j: %s', (glob, name, matches) => {
    expect(compileGlob(glob)(name)).toBe(matches);
  });

  it('a list matches when any of its globs does; an empty list matches nothing', () => {
    const m = globMatcher(['fs__read_*', 'a?c'])!;
    expect([m('fs__read_file'), m('abc'), m('abd'), m('fs__write')]).toEqual([true, true, false, false]);
    expect(globMatcher([])!('')).toBe(false);
  });
});

describe('resource templates', () => {
  it('match exactly what their regular expression matches', () => {
    const expr = fc.constantFrom('{v}', '{a,b}', '{+v}', '{#v}', '{?v}', '{&v}', '{/v}', '{.v}', '{;v}');
    const literal = fc.constantFrom('a', 'x', '/', '?', '&', '#', '.');
    const template = fc.array(fc.oneof(expr, literal), { maxLength: 6 }).map((a) => a.join(''));
    // One matcher for several URIs: what it learnt from one must hold for the next.
    fc.assert(
      fc.property(template, fc.array(text(['a', 'x', '/', '?', '&', '#', '.', '\n'], 10), { minLength: 1, maxLength: 6 }), (t, uris) => {
        const m = templateMatcher(t)!;
        const oracle = templateOracle(t);
        for (const uri of uris) expect(m.test(uri)).toBe(oracle.test(uri));
      }),
      { numRuns: 10_000 },
    );
  });

  it.each([
    ['file:///{+path}', 'file:///home/me/notes.md', true],
    ['db://{table}/{id}', 'db://users/42', true],
    ['db://{table}/{id}', 'db://users/42/x', false],
    ['db://{table}/{id}', 'db:///42', false], // a simple expression is never empty
    ['search{?q,lang}', 'search', true],
    ['search{?q,lang}', 'search?q=a&lang=en', true],
    ['search{?q,lang}', 'search/q', false],
    ['a.b://{x}', 'aXb://y', false], // literals are literal
  ])('%j against %j: %s', (template, uri, matches) => {
    expect(templateMatcher(template)!.test(uri)).toBe(matches);
  });

  it('an unclosed expression is no template, nor is one over 1,024 characters', () => {
    expect(templateMatcher('x://{id')).toBeNull();
    const long = `x://${'a'.repeat(1_000)}/{+rest}`; // 1,012 characters
    expect(templateMatcher(long)!.test(`x://${'a'.repeat(1_000)}/b`)).toBe(true);
    expect(templateMatcher(long.padEnd(MAX_TEMPLATE_LENGTH, 'z'))).not.toBeNull();
    expect(templateMatcher(long.padEnd(MAX_TEMPLATE_LENGTH + 1, 'z'))).toBeNull();
  });

  it('a template that needs more than a matcher keeps stops matching; others are untouched', () => {
    // A run of anything then 1,000 "a"s: over a run of "a"s, every place in the stretch is
    // alive at once, and the sets of them need ~500,000 places in all (16,384 are kept).
    let gaveUp = 0;
    const greedy = templateMatcher(`x://{+a}${'a'.repeat(1_000)}b`, () => gaveUp++)!;
    const fine = `x://${'a'.repeat(1_001)}b`;
    const other = templateMatcher('x://{+a}b')!;
    expect(greedy.test(`x://${'a'.repeat(5_000)}`)).toBe(false);
    expect(gaveUp).toBe(1);
    expect(greedy.test(fine)).toBe(false); // it would match: the matcher has given up
    expect(gaveUp).toBe(1); // said once
    expect(other.test(fine)).toBe(true);
    // Shorter stretches stay within the bounds and keep matching.
    const shorter = templateMatcher(`x://{+a}${'a'.repeat(150)}b`)!; // ~11,000 places
    expect(shorter.test(`x://${'a'.repeat(5_000)}`)).toBe(false);
    expect(shorter.test(`x://${'a'.repeat(151)}b`)).toBe(true);
  });

  it('a matcher can be used again (its state is per call)', () => {
    const m = templateMatcher('x://{id}')!;
    expect([m.test('x://1'), m.test('x://'), m.test('x://2')]).toEqual([true, false, true]);
  });
});

/** Runs `code` (a function body over `glob` and `template`, the built modules) in a worker; fails past `ms`. */
async function inWorker(code: string, ms = 10_000): Promise<unknown> {
  const glob = resolve('dist/src/policy/glob.js');
  const template = resolve('dist/src/catalog/uri-template.js');
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     Promise.all([import(${JSON.stringify(glob)}), import(${JSON.stringify(template)})])
       .then(([glob, template]) => parentPort.postMessage((() => { ${code} })()));`,
    { eval: true },
  );
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      new Promise((res, rej) => {
        worker.once('message', res);
        worker.once('error', rej);
      }),
      new Promise((_, rej) => (timer = setTimeout(() => rej(new Error(`still matching after ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
    await worker.terminate();
  }
}

describe('hostile names and templates', () => {
  it('a glob with many stars over a 100,000-character name answers at once', async () => {
    const answers = await inWorker(`
      const m = glob.compileGlob('*_*_*_*_*_*_*_x');
      const name = '_'.repeat(100000);
      return [m(name), m(name + 'x')];`);
    expect(answers).toEqual([false, true]);
  });

  it('a template of many runs over a 100,000-character URI answers at once', async () => {
    const answers = await inWorker(`
      const reserved = template.templateMatcher('evil://{+a}{+b}{+c}{+d}{+e}{+f}z');
      const simple = template.templateMatcher('x://{a}-{b}-{c}-{d}-{e}-{f}z');
      const many = 'a'.repeat(100000);
      // The worst a template within the bound can do: each "a" keeps another place alive.
      const widest = template.templateMatcher('{+a}a'.repeat(204) + 'b');
      return [
        reserved.test('evil://' + many), reserved.test('evil://' + many + 'z'),
        simple.test('x://' + 'a-'.repeat(50000)), simple.test('x://a-a-a-a-a-az'),
        widest.test(many.slice(0, 20000)), widest.test('a'.repeat(300) + 'b'),
      ];`);
    expect(answers).toEqual([false, true, false, true, false, true]);
  });
});
