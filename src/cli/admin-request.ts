/**
 * A CLI command's request to the daemon's admin routes, and how its answer is read: JSON from a
 * switchyard daemon; a switchyard daemon's refusal of a missing, wrong or non-admin key, said
 * plainly (AdminKeyRefused); and an answer no switchyard daemon gives (another program's page)
 * told by its status and content type, never printed (OtherProgramError). The daemon's address,
 * and the errors `withDaemon` turns into exit codes, are daemon-client.ts's.
 */
import { serversAnswer, type AnswerShape } from './admin-answers.js';
import { badPortRefusal, fetchRefusesPort } from './fetch-bad-ports.js';
import { daemonElsewhere, DaemonError, DaemonRefusal, fallbackOf, movedTo, NoAnswerError, foreignSocket, NoDaemonError, socketOf } from './daemon-client.js';

/** A switchyard daemon answered, and wants an admin key (401), or the key is not an admin's (403). */
export class AdminKeyRefused extends DaemonError {}

/**
 * A switchyard daemon answered on its main listener, and serves the admin routes on its admin
 * listener alone (listen.admin.exclusive): the command was pointed (--url) at the wrong one.
 */
export class AdminListenerElsewhere extends DaemonError {}

/** fetch refuses the daemon's port (a "bad port" of the Fetch standard): nothing was asked. */
export class BadPortError extends DaemonError {}

/** What answered is not a switchyard daemon: its answer is not the JSON the admin routes give (or not of their shape). */
export class OtherProgramError extends DaemonError {}

/**
 * GET a JSON admin route; NoDaemonError when nothing listens there, OtherProgramError when its
 * answer is not of the route's `shape` (admin-answers.ts). A daemon with authentication on wants
 * an admin credential: `key`, else env SWITCHYARD_API_KEY (as `connect` reads it; never an
 * argument, which other local users can see).
 */
export function getJson<T>(base: string, path: string, shape: AnswerShape<T>, opts: { timeoutMs?: number; key?: string } = {}): Promise<T> {
  return requestJson(base, path, shape, opts);
}

/**
 * POST to an admin route that acts (no body); as getJson. `answers`: error statuses whose JSON
 * body is the answer (a reload the daemon rejected says why in it), not a DaemonError.
 */
export function postJson<T>(
  base: string,
  path: string,
  shape: AnswerShape<T>,
  opts: { timeoutMs?: number; key?: string; answers?: readonly number[] } = {},
): Promise<T> {
  return requestJson(base, path, shape, { ...opts, method: 'POST' });
}

/**
 * `err` (a command's request) as said of a daemon of a build from before `command`: such a
 * daemon answers the command's route as an unknown path (405, no JSON), which reads as another
 * program on the port. When the port's /admin/servers answers as a switchyard daemon's, that is
 * what is said, with `remedy`; otherwise undefined (the error stands as it is).
 */
export async function olderDaemon(err: unknown, base: string, command: string, remedy: string): Promise<DaemonError | undefined> {
  if (!(err instanceof OtherProgramError)) return undefined;
  try {
    const { pid } = await getJson(base, '/admin/servers', serversAnswer);
    return new DaemonError(`the switchyard daemon at ${base}${pid === undefined ? '' : ` (pid ${pid})`} is of a build without \`${command}\`: ${remedy}`);
  } catch {
    return undefined; // not a daemon's answer either
  }
}

/**
 * The hub's 401 and 403 carry a Bearer challenge of its own: realm "switchyard" (API keys), the
 * admin scope (a key without it), or its own Protected Resource Metadata (OAuth).
 */
export function switchyardChallenge(header: string | null, base: string): boolean {
  if (!header || !/^\s*Bearer\b/i.test(header)) return false;
  if (/\brealm="switchyard"/i.test(header) || /\bscope="[^"]*\bswitchyard:admin\b/.test(header)) return true;
  const prm = /\bresource_metadata="([^"]*)"/.exec(header)?.[1];
  if (prm === undefined) return false;
  // Over the admin socket the metadata is named at the hub's HTTP address, which the CLI may not know.
  if (socketOf(base) !== undefined) return /^https?:\/\/[^/]+\/\.well-known\/oauth-protected-resource/.test(prm);
  // A TCP admin listener (listen.admin.port) names the metadata at the main listener's address.
  const main = fallbackOf(base);
  return prm.startsWith(`${base}/.well-known/oauth-protected-resource`) || (main !== undefined && prm.startsWith(`${main}/.well-known/oauth-protected-resource`));
}

/** The message of an admin route's JSON error: {error: "…"}, or a JSON-RPC error object from the edge (401). */
function errorMessage(body: unknown): string | undefined {
  const e = (body as { error?: unknown } | null)?.error;
  if (typeof e === 'string') return e;
  if (e && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string') return (e as { message: string }).message;
  return undefined;
}

/**
 * The answer read: its parsed body, or what the command says of an answer that is not the JSON
 * it asked for. `key`: whether the request carried one; `answers` as for postJson.
 */
export function readAnswer(
  base: string,
  path: string,
  res: { status: number; ok: boolean; headers: { get(name: string): string | null } },
  text: string,
  key: boolean,
  answers: readonly number[] = [],
): { body: unknown } | { error: DaemonError } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    // Not what any admin route answers: say who answered, not what its page holds.
    const type = res.headers.get('content-type')?.split(';', 1)[0]?.trim() || 'no content type';
    return { error: new OtherProgramError(`${base}${path} answered HTTP ${res.status} (${type}), which is not a switchyard daemon's answer: is another program on that port?`) };
  }
  if (res.ok || answers.includes(res.status)) return { body };
  const msg = errorMessage(body);
  const said = `HTTP ${res.status}${msg ? `: ${msg}` : ''}`;
  // The main listener of a daemon whose operator routes are on its admin listener alone: what
  // to do, not only the 404 (doctor took it for a busy daemon or another program).
  if (res.status === 404 && msg?.includes('(listen.admin.exclusive)'))
    return {
      error: new AdminListenerElsewhere(
        `a switchyard daemon runs at ${base}, and serves the admin routes on its admin listener alone (listen.admin.exclusive): give --url that listener's address (listen.admin's host and port, or unix: and its socket's path), or --config the daemon's config file, where the CLI finds it`,
      ),
    };
  if ((res.status === 401 || res.status === 403) && switchyardChallenge(res.headers.get('www-authenticate'), base)) {
    if (res.status === 403)
      return { error: new AdminKeyRefused(`a switchyard daemon runs at ${base}; the key in SWITCHYARD_API_KEY is not an admin key (${said}): set it to a key with the switchyard:admin scope`) };
    if (key) return { error: new AdminKeyRefused(`a switchyard daemon runs at ${base} and refused the key in SWITCHYARD_API_KEY (${said}): set it to one of its admin keys`) };
    return { error: new AdminKeyRefused(`a switchyard daemon runs at ${base} and needs an admin key: set SWITCHYARD_API_KEY to one (${said})`) };
  }
  // The daemon's own words first, as the command's: the route and status were noise before them.
  if (msg) return { error: new DaemonRefusal(`${msg} [HTTP ${res.status} from ${base}]`) };
  return { error: new DaemonRefusal(`the daemon at ${base} answered HTTP ${res.status} to ${path.split('?', 1)[0]}`) };
}

async function requestJson<T>(base: string, path: string, shape: AnswerShape<T>, opts: RequestOptions): Promise<T> {
  const moved = movedTo(base);
  if (moved !== undefined) return requestAt(moved, path, shape, opts);
  try {
    return await requestConfigured(base, path, shape, opts);
  } catch (err) {
    // Nothing where the config says: the daemon of that config may run where it started, its
    // listen edited since (which it applies only at a restart), as it recorded.
    const elsewhere = err instanceof NoDaemonError ? daemonElsewhere(base) : undefined;
    if (!elsewhere) throw err;
    for (const at of elsewhere.bases) {
      try {
        const answer = await requestAt(at, path, shape, opts);
        elsewhere.found(at);
        return answer;
      } catch (e) {
        if (e instanceof NoDaemonError) continue;
        // Something answered there, if not as asked (a refusal, no admin key): the daemon's words, and where it is.
        elsewhere.found(at);
        throw e;
      }
    }
    throw err;
  }
}

/** A request where the config says the daemon is: its admin listener, then its main one (fallbackOf). */
async function requestConfigured<T>(base: string, path: string, shape: AnswerShape<T>, opts: RequestOptions): Promise<T> {
  try {
    return await requestAt(base, path, shape, opts);
  } catch (err) {
    // The config names an admin listener the running daemon does not have yet (started before
    // it was added): it serves the admin routes on its main listener too.
    const main = fallbackOf(base);
    if (!(err instanceof NoDaemonError) || main === undefined) throw err;
    try {
      return await requestAt(main, path, shape, opts);
    } catch (second) {
      throw second instanceof NoDaemonError ? new NoDaemonError(`no switchyard daemon is running at ${base} (listen.admin) nor at ${main} (start one with \`switchyard start\`)`) : second;
    }
  }
}

/** How long a request waits for the daemon's answer unless its command says otherwise. */
const DEFAULT_TIMEOUT_MS = 10_000;

/** "10 s", "2 s", "0.5 s": a timeout as the error line says it. */
const seconds = (ms: number): string => `${Math.round(ms / 100) / 10} s`;

type RequestOptions = { timeoutMs?: number; key?: string; method?: 'GET' | 'POST'; answers?: readonly number[] };

async function requestAt<T>(base: string, path: string, shape: AnswerShape<T>, opts: RequestOptions): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const key = opts.key ?? process.env.SWITCHYARD_API_KEY;
  if (key) headers.authorization = `Bearer ${key}`;
  let res: Pick<Response, 'status' | 'ok' | 'headers' | 'text'>;
  const socket = socketOf(base);
  const foreign = foreignSocket(base);
  if (foreign) throw new DaemonError(foreign);
  const init = { method: opts.method ?? 'GET', headers, signal: AbortSignal.timeout(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS) };
  try {
    res = socket === undefined ? await fetch(base + path, init) : await overSocket(socket, path, init);
  } catch (err) {
    const code = (err as { cause?: { code?: string } }).cause?.code;
    // A socket file that is not there, or that a hub no longer running left behind: no daemon.
    if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EADDRNOTAVAIL' || (socket !== undefined && code === 'ENOENT'))
      throw new NoDaemonError(`no switchyard daemon is running at ${base} (start one with \`switchyard start\`)`);
    if (socket !== undefined && code === 'EACCES')
      throw new DaemonError(`${base}: permission denied: the admin socket (listen.admin.path) is open to the daemon's user alone; run the command as that user`);
    // Said as a refusal is: what happened, as the command's, then where (the route is noise here too).
    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if ((err as Error).name === 'TimeoutError') throw new NoAnswerError(`no answer within ${seconds(timeoutMs)} [at ${base}]`);
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    // fetch's whole word for a port it will not connect to ("bad port") said nothing of why.
    const port = socket === undefined ? Number(new URL(base).port) : 0;
    if (cause === 'bad port' && fetchRefusesPort(port)) throw new BadPortError(badPortRefusal(base, port));
    throw new NoAnswerError(`the request failed: ${cause ?? (err as Error).message} [at ${base}]`);
  }
  const a = readAnswer(base, path, res, await res.text(), Boolean(key), opts.answers);
  if ('error' in a) throw a.error;
  // JSON, but not what a hub sends: another program (its fields would be read as a hub's).
  if (!shape(a.body)) throw new OtherProgramError(notAHub(base, path));
  return a.body;
}

/**
 * A request over the admin socket (listen.admin.path): undici's own fetch, which takes a
 * dispatcher that connects there (Node's global fetch has no such option of its own). The
 * answer is read whole before the dispatcher closes.
 */
async function overSocket(socketPath: string, path: string, init: { method: string; headers: Record<string, string>; signal: AbortSignal }): Promise<Pick<Response, 'status' | 'ok' | 'headers' | 'text'>> {
  const { Agent, fetch: viaSocket } = await import('undici');
  const dispatcher = new Agent({ connect: { socketPath } });
  try {
    const res = await viaSocket(`http://localhost${path}`, { ...init, dispatcher });
    const text = await res.text();
    return { status: res.status, ok: res.ok, headers: res.headers, text: async () => text };
  } finally {
    void dispatcher.close();
  }
}

/** What the commands say of a JSON answer of the wrong shape (the route without its query). */
export function notAHub(base: string, path: string): string {
  return `the program on ${base} is not a switchyard hub (its answer to ${path.split('?', 1)[0]} is not what a hub sends)`;
}
