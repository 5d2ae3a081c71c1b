import { readFileSync } from 'node:fs';
import { packageRoot } from './paths.js';

/** The package version, read once from package.json. */
export const VERSION: string = (JSON.parse(readFileSync(`${packageRoot}/package.json`, 'utf8')) as { version: string }).version;
