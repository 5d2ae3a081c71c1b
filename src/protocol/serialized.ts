/**
 * A JSON-RPC message that is already text. Aggregated lists are large and change rarely, so
 * the edge serialises each page's items once and splices them into every answer instead of
 * stringifying hundreds of kilobytes per request.
 */
export class Serialized {
  constructor(readonly text: string) {}
}

/** The wire text of a message, whether it came pre-serialised or as an object. */
export function wireText(msg: object): string {
  return msg instanceof Serialized ? msg.text : JSON.stringify(msg);
}

const arrays = new WeakMap<object, string>();

/** JSON of an array that is shared across answers (a cached list page), serialised once. */
export function sharedArrayJson(items: readonly unknown[]): string {
  let s = arrays.get(items);
  if (s === undefined) {
    s = JSON.stringify(items);
    arrays.set(items, s);
  }
  return s;
}

/**
 * `{"jsonrpc":"2.0","id":…,"result":{"<field>":<items>,…rest}}` with the items' cached JSON.
 * `rest` must not hold `field`.
 */
export function listResponse(id: string | number, field: string, items: readonly unknown[], rest: Record<string, unknown>): Serialized {
  const tail = JSON.stringify(rest);
  const more = tail.length > 2 ? `,${tail.slice(1, -1)}` : '';
  return new Serialized(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{${JSON.stringify(field)}:${sharedArrayJson(items)}${more}}}`);
}
