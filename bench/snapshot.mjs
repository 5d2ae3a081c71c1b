#!/usr/bin/env node
// The content snapshot of an aggregated list (what pagination cursors name), measured as the
// hub computes it (dist/src/catalog/snapshot.js: the SHA-256 of the list's JSON fed from each
// item's JSON, kept with the item) beside one JSON.stringify of the whole list and its SHA-256
// (how it was computed before the thirty-third session; the same value): the first time, and
// again after one server's items changed.
// node bench/snapshot.mjs [--tools 5000] [--servers 100] [--rounds 5]
import { createHash } from 'node:crypto';
import { join, resolve } from 'node:path';
import { numberOption } from './lib/args.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const { contentSnapshot } = await import(join(ROOT, 'dist/src/catalog/snapshot.js'));
const TOOLS = numberOption('tools', 5000);
const SERVERS = numberOption('servers', 100);
const ROUNDS = numberOption('rounds', 5);

const tool = (i) => ({
  name: `s${i % SERVERS}__tool_${i}`,
  description: 'Does a thing with its input and returns a result described here at some length. '.repeat(3),
  inputSchema: { type: 'object', properties: { a: { type: 'string', description: 'the a' }, b: { type: 'number' }, c: { type: 'array', items: { type: 'string' } } }, required: ['a'] },
  annotations: { readOnlyHint: true },
});
const whole = (scopes, items) => createHash('sha256').update(scopes).update('\n').update(JSON.stringify(items)).digest('base64url').slice(0, 22);
const time = (f) => {
  const t = performance.now();
  f();
  return performance.now() - t;
};
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

const r = { whole: [], first: [], changed: [] };
for (let round = 0; round < ROUNDS; round++) {
  const items = Array.from({ length: TOOLS }, (_, i) => tool(i)); // fresh objects: nothing digested yet
  r.whole.push(time(() => whole('scopes', items)));
  r.first.push(time(() => contentSnapshot('scopes', items)));
  const perServer = Math.ceil(TOOLS / SERVERS);
  for (let i = 0; i < perServer; i++) items[i] = { ...items[i], description: `changed ${round}` }; // one server's list changed
  r.changed.push(time(() => contentSnapshot('scopes', items)));
}
const bytes = JSON.stringify(Array.from({ length: TOOLS }, (_, i) => tool(i))).length;
console.log(
  `${TOOLS} tools (${(bytes / 1e6).toFixed(1)} MB of JSON), median of ${ROUNDS}: one digest of the whole list ${median(r.whole).toFixed(1)} ms (every time); ` +
    `from item texts: first ${median(r.first).toFixed(1)} ms, after one server's ${Math.ceil(TOOLS / SERVERS)} tools changed ${median(r.changed).toFixed(1)} ms`,
);
