/** A location inside the config document: object keys and array indexes from the root. */
export type KeySegments = ReadonlyArray<string | number>;

/** Readable key path for messages: `servers.github.args[2]`; the root itself is `config`. */
export function keyPath(segments: KeySegments): string {
  let out = '';
  for (const s of segments) {
    if (typeof s === 'number') out += `[${s}]`;
    else out += out === '' ? s : `.${s}`;
  }
  return out === '' ? 'config' : out;
}

/**
 * Segments of a JSON Pointer (as ajv reports `instancePath`), walking `data` so that array
 * indexes print as `[n]` while an object key that happens to be numeric stays a key.
 */
export function pointerSegments(pointer: string, data: unknown): (string | number)[] {
  if (pointer === '') return [];
  const out: (string | number)[] = [];
  let node: unknown = data;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node)) {
      const i = Number(key);
      out.push(i);
      node = node[i];
    } else {
      out.push(key);
      node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
    }
  }
  return out;
}
