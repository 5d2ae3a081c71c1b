// Node 20 shim for the conformance CLIs: both lines import `globSync` from `node:fs`,
// which only exists from Node 22. Registering this hook makes `fs`/`node:fs` resolve
// to ./fs.mjs (node:fs plus a small globSync) for every ESM importer in the process.
// Usage: node --import ./test/conformance/shim/register.mjs <conformance>/dist/index.js ...
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
