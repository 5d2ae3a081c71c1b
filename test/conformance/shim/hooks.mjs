// Module-resolution hook (runs on the loader thread): redirect `fs` and `node:fs`
// to the augmented module, except when the augmented module itself asks for the real one.
const shimUrl = new URL('./fs.mjs', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== shimUrl) {
    return { url: shimUrl, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
