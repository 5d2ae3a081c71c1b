/**
 * Tools a 2025-11-25 server runs only as tasks (`execution.taskSupport: "required"`): the hub
 * does not offer tasks to its clients, so it drives the task itself (digest §15) and the client
 * gets a plain result. The call goes out with `task: {}`; the server answers at once with a
 * CreateTaskResult; `tasks/result` then waits until the task ends and gives what the call would
 * have given (a result or a JSON-RPC error). A call cancelled meanwhile cancels the task
 * (`tasks/cancel`; the spec's way, not notifications/cancelled alone).
 */
import type { ServerHandle } from '../catalog/catalog.js';
import { LEGACY } from '../protocol/era.js';
import { INTERNAL_ERROR, RpcError } from '../protocol/errors.js';
import type { CallOptions } from '../upstream/types.js';

type Result = Record<string, unknown>;

/** Whether the hub calls this tool of this server as a task: the tool requires it and the server takes task-augmented calls. */
export function runsAsTask(server: ServerHandle, tool: Result): boolean {
  const execution = tool.execution as { taskSupport?: unknown } | undefined;
  if (execution?.taskSupport !== 'required' || server.upstream.era !== LEGACY) return false;
  const tasks = server.upstream.capabilities?.tasks as { requests?: { tools?: { call?: unknown } } } | undefined;
  return tasks?.requests?.tools?.call !== undefined;
}

/** The task a CreateTaskResult names, or an error saying what the server answered instead. */
function taskIdOf(server: ServerHandle, created: Result): string {
  const task = created.task as { taskId?: unknown } | undefined;
  if (typeof task?.taskId === 'string' && task.taskId !== '') return task.taskId;
  throw new RpcError(INTERNAL_ERROR, `server "${server.id}" was asked to run the call as a task and did not answer with one (no task.taskId)`);
}

/**
 * A call sent as a task (`params.task` set): its outcome, what `tasks/result` gives once the task
 * ends, under the call's own progress token (progress keeps the wait alive, and reaches the
 * client). A server that ran it as a plain call after all answered with the result itself.
 */
export async function asTask(server: ServerHandle, method: string, params: Result, opts: CallOptions): Promise<Result> {
  let token: string | undefined;
  const created = await server.upstream.request(method, params, { ...opts, onToken: (t) => (token = t) });
  if (created.task === undefined) return created;
  return taskOutcome(server, created, token === undefined ? opts : { ...opts, progressToken: token });
}

/** The task's outcome: what `tasks/result` gives once it ends; a cancelled call cancels the task. */
async function taskOutcome(server: ServerHandle, created: Result, opts: CallOptions): Promise<Result> {
  const taskId = taskIdOf(server, created);
  const signal = opts.signal;
  const cancelTask = (): void => {
    // Fire and forget: the call is over for its client whatever the server says. The hub's own
    // request, no client's call (hubOwn): left unanswered it is no call left unanswered (three in
    // a row take the server down as hung), and it is given the server's own timeoutMs.
    server.upstream.request('tasks/cancel', { taskId }, { hubOwn: true }).catch(() => undefined);
  };
  if (signal?.aborted) cancelTask();
  else signal?.addEventListener('abort', cancelTask, { once: true });
  // Not retried: a task lives in the server process the call reached.
  const { retry: _once, ...once } = opts;
  try {
    return await server.upstream.request('tasks/result', { taskId }, once);
  } catch (err) {
    // Timed out, or the connection failed: nobody will fetch its result, so it need not run on.
    // (An error the task ended with is no reason; cancelling an ended task is harmless.)
    if (!(err instanceof RpcError) && !signal?.aborted) cancelTask();
    throw err;
  } finally {
    signal?.removeEventListener('abort', cancelTask);
  }
}
