import { RpcError, UpstreamRpcError } from '../protocol/errors.js';
import { redactErrorsIn, redactErrorText } from '../policy/secret-text.js';

/**
 * An upstream's JSON-RPC error as the hub passes it on: credentials in its message and data
 * (an upstream echoing its own token, a connection string with a password) and the config's
 * own secret values, which it may echo bare (policy/config-secrets.ts), are redacted here,
 * once, so neither the client nor the ledger ever gets them. Only the error path pays for it.
 */
export function upstreamError(error: unknown): UpstreamRpcError {
  const e = RpcError.from(error);
  return new UpstreamRpcError(e.code, redactErrorText(e.message), redactErrorsIn(e.data));
}
