// node:fs re-exported unchanged, plus `globSync` for Node < 22. Only the conformance
// `tier-check` command calls it (with patterns like `**/checks.json` and `{cwd}`), so
// this supports `*`, `?` and `**` path segments, which is all that needs.
import fs from 'node:fs';
import path from 'node:path';

export * from 'node:fs';
export default fs;

function segmentToRegExp(segment) {
  const body = segment.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]');
  return new RegExp(`^${body}$`);
}

function walk(root, rel, segments, out) {
  if (segments.length === 0) {
    out.add(rel);
    return;
  }
  const [head, ...rest] = segments;
  const dir = path.join(root, rel);
  if (head === '**') {
    walk(root, rel, rest, out);
    for (const entry of safeReaddir(dir)) {
      if (entry.isDirectory()) walk(root, rel ? `${rel}/${entry.name}` : entry.name, segments, out);
    }
    return;
  }
  const matcher = segmentToRegExp(head);
  for (const entry of safeReaddir(dir)) {
    if (!matcher.test(entry.name)) continue;
    if (rest.length > 0 && !entry.isDirectory()) continue;
    walk(root, rel ? `${rel}/${entry.name}` : entry.name, rest, out);
  }
}

function safeReaddir(dir) {
  try {
    return fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

export function globSync(pattern, options = {}) {
  if (typeof fs.globSync === 'function') return fs.globSync(pattern, options);
  const cwd = options.cwd ? String(options.cwd) : process.cwd();
  const patterns = Array.isArray(pattern) ? pattern : [pattern];
  const out = new Set();
  for (const p of patterns) walk(cwd, '', String(p).split('/').filter(Boolean), out);
  return [...out].filter((p) => p !== '').sort();
}
