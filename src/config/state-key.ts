/**
 * The text of a requestState key (`policy.requestStateKey`, `SWITCHYARD_STATE_KEY`): 64 hex
 * characters, or base64 of 32 bytes. One reading for the config's check and for the hub's start,
 * so that `config validate` passes no key `start` then refuses.
 */
export function decodeStateKey(given: string): Buffer | undefined {
  const k = /^[0-9a-f]{64}$/i.test(given) ? Buffer.from(given, 'hex') : Buffer.from(given, 'base64');
  return k.length === 32 ? k : undefined;
}
