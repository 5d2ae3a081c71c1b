import type { ServerCapabilities } from '../protocol/types.js';
import { methodTable } from '../protocol/method-table.js';

/** The four paginated list families and how each is fetched and named on the wire. */
export type ListKind = 'tools' | 'prompts' | 'resources' | 'resourceTemplates';

export const LIST_KINDS: readonly ListKind[] = ['tools', 'prompts', 'resources', 'resourceTemplates'];

/** The field that names an item of each kind (its hub name, URI or template). */
export const NAME_FIELD: Record<ListKind, 'name' | 'uri' | 'uriTemplate'> = { tools: 'name', prompts: 'name', resources: 'uri', resourceTemplates: 'uriTemplate' };

export const LIST_METHOD: Record<ListKind, string> = {
  tools: 'tools/list',
  prompts: 'prompts/list',
  resources: 'resources/list',
  resourceTemplates: 'resources/templates/list',
};

/** The list kind of a method a client or an upstream named (no prototype: see methodTable). */
export const KIND_OF_METHOD = methodTable<ListKind>({
  'tools/list': 'tools',
  'prompts/list': 'prompts',
  'resources/list': 'resources',
  'resources/templates/list': 'resourceTemplates',
});

/** The capability family that gates each list. */
export const CAPABILITY: Record<ListKind, 'tools' | 'prompts' | 'resources'> = {
  tools: 'tools',
  prompts: 'prompts',
  resources: 'resources',
  resourceTemplates: 'resources',
};

/** Which list_changed notification invalidates which lists. */
export const CHANGED_NOTIFICATION = methodTable<ListKind[]>({
  'notifications/tools/list_changed': ['tools'],
  'notifications/prompts/list_changed': ['prompts'],
  'notifications/resources/list_changed': ['resources', 'resourceTemplates'],
});

export function offers(caps: ServerCapabilities | undefined, kind: ListKind): boolean {
  return !!caps && caps[CAPABILITY[kind]] !== undefined && caps[CAPABILITY[kind]] !== null;
}

export function declaresListChanged(caps: ServerCapabilities | undefined, kind: ListKind): boolean {
  const fam = caps?.[CAPABILITY[kind]] as { listChanged?: boolean } | undefined;
  return fam?.listChanged === true;
}
