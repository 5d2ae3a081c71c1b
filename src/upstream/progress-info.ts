/**
 * What a client is told of a server's `notifications/progress`: the numbers, and the message
 * and `_meta` the server gave, made fit to pass on. Pure; which call it is about, and the
 * timeout its progress resets, stay with the connection (UpstreamBase.onNotification).
 */
import { isObj } from '../protocol/jsonrpc.js';
import { withoutRelatedTask } from '../protocol/input-results.js';
import type { ProgressInfo } from '../protocol/types.js';
import { redactErrorText } from '../policy/secret-text.js';

/** The progress `params` report, or undefined when they carry no number to report. */
export function progressInfo(params: Record<string, unknown>): ProgressInfo | undefined {
  if (typeof params.progress !== 'number') return undefined;
  const info: ProgressInfo = { progress: params.progress };
  if (typeof params.total === 'number') info.total = params.total;
  // Upstream text the client shows its user, as a log line's: credentials redacted.
  if (typeof params.message === 'string') info.message = redactErrorText(params.message);
  // Its keys are the server's to the client, as a result's _meta is (digest §8.4); but not
  // the related-task, a task the hub runs itself and the client never saw (relayedInput).
  const meta = isObj(params._meta) ? withoutRelatedTask(params._meta) : undefined;
  if (meta !== undefined) info._meta = meta;
  return info;
}
