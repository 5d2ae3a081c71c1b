import type { ClientCapabilities } from './types.js';

/**
 * Whether a client declared what a server → client request needs (digest §2.1, §5.1): an
 * elicitation of its mode (`elicitation: {}` is form only; `{url: {}}` is URL only; both keys,
 * both), a sampling request with `tools` only under `sampling.tools`, roots under `roots`. A
 * method it does not know, never.
 */
export function declares(caps: ClientCapabilities, method: string, params?: Record<string, unknown>): boolean {
  switch (method) {
    case 'elicitation/create':
      return elicits(caps, params?.mode === 'url' ? 'url' : 'form');
    case 'sampling/createMessage':
      return !!caps.sampling && (params?.tools === undefined || !!(caps.sampling as { tools?: unknown }).tools);
    case 'roots/list':
      return !!caps.roots;
    default:
      return false;
  }
}

/** Whether the client takes elicitations of this mode. */
export function elicits(caps: ClientCapabilities, mode: 'form' | 'url'): boolean {
  const e = caps.elicitation;
  if (!e || typeof e !== 'object') return false;
  if (e.form === undefined && e.url === undefined) return mode === 'form';
  return e[mode] !== undefined;
}

/** The capability a client would have to declare for it (the `-32021` error's `requiredCapabilities`). */
export function required(method: string, params?: Record<string, unknown>): Record<string, unknown> {
  switch (method) {
    case 'elicitation/create':
      return { elicitation: params?.mode === 'url' ? { url: {} } : { form: {} } };
    case 'sampling/createMessage':
      return { sampling: params?.tools === undefined ? {} : { tools: {} } };
    case 'roots/list':
      return { roots: {} };
    default:
      return { [method]: {} };
  }
}
