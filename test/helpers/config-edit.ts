/** Editing a running hub's config file, and waiting for its reload to say it took a change. */
import { readFileSync, writeFileSync } from 'node:fs';
import { expect } from 'vitest';
import type { HubProcess } from './hub-process.js';

/** Sets one top-level section of the hub's config file (undefined: removes it); the hub's watch reloads it. */
export function setSection(hub: HubProcess, key: string, value: unknown): void {
  const config = JSON.parse(readFileSync(hub.configFile, 'utf8')) as Record<string, unknown>;
  if (value === undefined) delete config[key];
  else config[key] = value;
  writeFileSync(hub.configFile, JSON.stringify(config));
}

/** Waits until `n` of the hub's log lines contain `text`. */
export async function loggedTimes(hub: HubProcess, text: string, n: number, timeoutMs = 10_000): Promise<void> {
  await expect.poll(() => hub.logs.filter((l) => l.includes(text)).length, { timeout: timeoutMs, interval: 50 }).toBe(n);
}
