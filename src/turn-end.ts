/**
 * The end of a turn of the event loop, in two stages that run in the same check phase: first
 * COMMIT (the ledger's pending-file write), then WRITE (frames to stdio upstreams, answers to
 * clients). Node drains the microtask queue between two immediates, so whatever the commit's
 * resolved promises lead to (a call forwarded, an answer sent) is queued before WRITE runs, and
 * leaves in this turn.
 *
 * Why: each of the three used a setImmediate of its own, opened lazily. A call whose row
 * waited for the commit (from 16 calls in flight) was forwarded from inside the check phase,
 * and an immediate opened there runs only in the next turn of the loop: its frame, and later
 * its answer, each waited a whole extra turn (a poll of every socket) in the hub. Measured
 * against the build before (stdio echo, ledger on, the two hubs live at once, alternating
 * rounds): 1.067× at concurrency 32 (1.002–1.212× over seven rounds), 1.093× at 64
 * (1.031–1.224×), and the event loop went idle less often per call.
 */
/**
 * Calls in flight from which a busy hub's writes wait for the end of the turn: the edge holds
 * answers to calls that waited, and the ledger writes even a turn's first line with the rest.
 * One number, because the ledger's choice relies on the edge's: its answers wait anyway.
 */
export const HOLD_FROM = 16;

export const COMMIT = 0;
export const WRITE = 1;
export type Stage = typeof COMMIT | typeof WRITE;

type Task = () => void;

let commits: Task[] = [];
let writes: Task[] = [];
/** Both immediates of this turn are queued and WRITE's has not run yet. */
let open = false;

/**
 * Runs `task` at the end of this turn, in its stage. A COMMIT task queued after this turn's
 * COMMIT stage ran goes to the next turn's.
 */
export function atTurnEnd(stage: Stage, task: Task): void {
  (stage === COMMIT ? commits : writes).push(task);
  if (!open) openTurn();
}

function openTurn(): void {
  open = true;
  setImmediate(runCommits);
  setImmediate(runWrites);
}

function runCommits(): void {
  const tasks = commits;
  commits = [];
  runAll(tasks);
}

function runWrites(): void {
  open = false;
  const tasks = writes;
  writes = [];
  try {
    runAll(tasks);
  } finally {
    // Queued since this turn's stages ran (a commit from the microtasks after COMMIT, a write
    // from a WRITE task): the next turn.
    if (!open && (commits.length > 0 || writes.length > 0)) openTurn();
  }
}

/**
 * Every task runs, even after one threw (they were separate immediates before, and the others'
 * frames and answers must not be lost with it); the first error is thrown again at the end.
 */
function runAll(tasks: Task[]): void {
  let threw = false;
  let first: unknown;
  for (const t of tasks) {
    try {
      t();
    } catch (err) {
      if (!threw) first = err;
      threw = true;
    }
  }
  if (threw) throw first;
}
