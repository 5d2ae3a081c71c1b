import { RpcError, UpstreamRpcError } from '../protocol/errors.js';
import { redactSecretsIn, redactSecretText } from '../policy/secret-text.js';

/**
 * An upstream's JSON-RPC error as the hub passes it on: credentials in its message and data
 * (an upstream echoing its own token, a connection string with a password) are redacted here,
 * once, so neither the client nor the ledger ever gets them. Only the error path pays for it.
 */
export function upstreamError(error: unknown): UpstreamRpcError {
  const e = RpcError.from(error);
  return new UpstreamRpcError(e.code, redactSecretText(e.message), redactSecretsIn(e.data));
}
