import { META_SUBSCRIPTION_ID } from '../protocol/meta.js';
import type { Request } from '../protocol/jsonrpc.js';
import type { HubCore, MessageSink } from './core.js';
import type { Exchange } from './exchange.js';

interface Listener {
  id: unknown;
  sink: MessageSink & { end(): void };
  tools: boolean;
  prompts: boolean;
  resources: boolean;
}

const FLAG: Record<string, 'tools' | 'prompts' | 'resources'> = {
  tools: 'tools',
  prompts: 'prompts',
  resources: 'resources',
  resourceTemplates: 'resources',
};
const METHOD = {
  tools: 'notifications/tools/list_changed',
  prompts: 'notifications/prompts/list_changed',
  resources: 'notifications/resources/list_changed',
} as const;

/**
 * Modern `subscriptions/listen` streams: acknowledgement first, then only the opted-in list
 * changes, each tagged with the listen request's id (digest §4.1).
 */
export class ListenHub {
  private readonly listeners = new Set<Listener>();

  constructor(core: HubCore) {
    core.events.on('listChanged', (kind: string) => {
      const flag = FLAG[kind];
      if (!flag) return;
      for (const l of this.listeners) {
        if (l.sink.closed) this.listeners.delete(l);
        else if (l[flag]) l.sink.send({ jsonrpc: '2.0', method: METHOD[flag], params: { _meta: { [META_SUBSCRIPTION_ID]: l.id } } });
      }
    });
  }

  open(req: Request, ex: Exchange): void {
    const want = (req.params?.notifications ?? {}) as Record<string, unknown>;
    const honoured: Record<string, unknown> = {};
    for (const k of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const) if (want[k] === true) honoured[k] = true;
    if (!ex.stream) return ex.reply(undefined, 400);
    const sink = ex.stream();
    const l: Listener = {
      id: req.id,
      sink,
      tools: honoured.toolsListChanged === true,
      prompts: honoured.promptsListChanged === true,
      resources: honoured.resourcesListChanged === true,
    };
    sink.send({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: honoured, _meta: { [META_SUBSCRIPTION_ID]: req.id } },
    });
    this.listeners.add(l);
    ex.closed.addEventListener('abort', () => this.listeners.delete(l));
  }

  closeAll(): void {
    for (const l of this.listeners) l.sink.end();
    this.listeners.clear();
  }
}
