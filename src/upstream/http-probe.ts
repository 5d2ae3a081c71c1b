/**
 * The era probe of a Streamable HTTP server: a modern `server/discover` POST (digest §2.3),
 * whose answer era-probe.ts reads. Auth trouble, a busy server, network errors and timeouts say
 * nothing about the era: they are `no-evidence`, with what the operator needs to know (how
 * long a busy server asked to be left, how to fix a refused credential).
 */
import { MODERN } from '../protocol/era.js';
import { parseFrame, type Message } from '../protocol/jsonrpc.js';
import type { Logger } from '../log.js';
import { timeoutSignal } from '../transport/timeout-signal.js';
import { ExchangeAbort } from '../transport/http-client.js';
import { ANSWERED_STREAM_LINGER_MS } from './stream-waits.js';
import { httpVerdict, type ProbeVerdict } from './era-probe.js';
import { answerProblem, unauthorizedAdvice } from './http-answers.js';
import { parseBearerChallenge, type HttpExchanges } from './oauth-client.js';
import { errMessage } from './lifecycle.js';
import { statusError } from './status-text.js';
import type { UpstreamSpec } from './types.js';

/** Sends `server/discover` (request id `id`, `params` the hub's discover params) and reads the verdict. */
export async function probeHttpEra(
  http: HttpExchanges,
  spec: Pick<UpstreamSpec, 'id' | 'url' | 'probeTimeoutMs' | 'oauth' | 'headers'>,
  id: string,
  params: Record<string, unknown>,
  log: Logger,
): Promise<ProbeVerdict> {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'server/discover',
    params,
  });
  const t = timeoutSignal(spec.probeTimeoutMs);
  const msgs: Message[] = [];
  let v: ProbeVerdict;
  try {
    // An answer stream the server keeps open past its answer to the probe (it should close it)
    // is closed by the hub, as a call's is: waited out, the probe said "no answer" at its timeout.
    const ctl = new ExchangeAbort();
    const a = await http.post(body, {
      headers: { 'mcp-protocol-version': MODERN, 'mcp-method': 'server/discover' },
      signal: t.signal,
      abort: ctl,
      replay: true,
      onMessage: (c) => {
        if (c.kind !== 'response') return;
        msgs.push(c.msg);
        if (c.msg.id === id || c.msg.id === undefined || c.msg.id === null) ctl.answered(ANSWERED_STREAM_LINGER_MS);
      },
    });
    if (a.body !== undefined) {
      const c = parseFrame(a.body);
      if (c.kind === 'response') msgs.push(c.msg);
    }
    v = httpVerdict(a.status, msgs, id);
    if (v.kind === 'no-evidence' && (a.status === 429 || a.status === 503)) {
      const busy = statusError(a.status, a.headers);
      v = { kind: 'no-evidence', reason: busy.message, retryAfterMs: busy.retryAfterMs };
    }
    // A redirect (never followed) says where to: a server mounted at `/mcp/` redirects `/mcp` there.
    if (v.kind === 'no-evidence' && a.status >= 300 && a.status < 400 && spec.url !== undefined) v = { kind: 'no-evidence', reason: answerProblem(a, spec.url) ?? v.reason };
    if (v.kind === 'no-evidence' && a.status === 401 && !spec.oauth) {
      const advice = unauthorizedAdvice(parseBearerChallenge(a.headers['www-authenticate']), spec.id, spec.headers);
      if (advice) v = { kind: 'no-evidence', reason: `${v.reason} (${advice})` };
    }
  } catch (err) {
    v = { kind: 'no-evidence', reason: t.timedOut() ? `no answer within ${spec.probeTimeoutMs} ms` : errMessage(err) };
  } finally {
    t.clear();
  }
  log.info({ verdict: v.kind, reason: 'reason' in v ? v.reason : undefined }, 'era probe');
  return v;
}
