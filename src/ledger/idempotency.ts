import type { Database, Statement } from 'better-sqlite3';
import type { Logger } from '../log.js';
import type { GroupCommit } from './group-commit.js';
import type { IdempotencyClaim, KeyOwner, StoredAnswer } from './types.js';
import { resultJson } from '../protocol/serialized.js';

/** Rejects the waiters of a claim whose first caller gave up before forwarding: claim again. */
export class IdempotencyAbandonedError extends Error {
  override readonly name = 'IdempotencyAbandonedError';
  constructor() {
    super('the earlier request with this idempotency key was abandoned before it ran; claim the key again');
  }
}

/** Rejects the waiters of a claim whose call ended without a known outcome (see markUnknown). */
export class IdempotencyUnknownError extends Error {
  override readonly name = 'IdempotencyUnknownError';
  constructor() {
    super('the earlier request with this idempotency key ended without a known outcome; check its effect, then use a new key');
  }
}

interface Waiter {
  promise: Promise<StoredAnswer>;
  resolve: (a: StoredAnswer) => void;
  reject: (e: Error) => void;
}

/** This process's view of a key whose latest state may not be committed yet. */
interface Live {
  tool: string;
  argsHash: string;
  state: 'in_flight' | 'done' | 'abandoned' | 'unknown';
  answer?: StoredAnswer;
  created: number;
  waiter: Waiter;
  pendingWrites: number;
  /** Requests waiting now for this call's answer (its duplicates, joined). */
  waiters: number;
}

interface DbEntry {
  tool: string;
  args_hash: string;
  state: 'in_flight' | 'done' | 'unknown';
  answer_json: string | null;
  created_ms: number;
  completed_ms: number | null;
}

function waiter(): Waiter {
  let resolve!: (a: StoredAnswer) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<StoredAnswer>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined); // nobody may be waiting; never an unhandled rejection
  return { promise, resolve, reject };
}

/** The table's tool_group for `/mcp` and a plain stdio (a group name is never empty). */
const NO_GROUP = '';
/** The tool_group of a row kept before keys were scoped to groups (migration 0016): any endpoint's. */
const ANY_GROUP = '*';

/** (principal, tool_group) of a key's owner, as the table keeps them. */
function ownerOf(owner: KeyOwner): [principal: string, group: string] {
  return typeof owner === 'string' ? [owner, NO_GROUP] : [owner.principal, owner.group ?? NO_GROUP];
}

/**
 * Idempotency keys for tools/call, scoped to (principal, tool group, key): the group is the
 * endpoint's (KeyOwner). Decisions are synchronous:
 * in-flight claims live in memory (one writer process per ledger file), everything else
 * is read from the table; writes ride the ledger's group commit, so a claim is durable by
 * the time the caller's `beginCommitted()` resolves.
 *
 * Lifecycle: claim → 'new' → the caller runs the call → complete(answer), or abandon()
 * (it never ran), or markUnknown() (it may have run).
 * Waiters get the answer once it is committed. abandon() deletes the claim and rejects
 * waiters with IdempotencyAbandonedError: they should claim again (one of them becomes
 * 'new'). Entries older than the TTL (counted from the claim) count as absent, except a
 * claim still running in this process.
 */
export class IdempotencyStore {
  private readonly live = new Map<string, Live>();
  private readonly get: Statement;
  private readonly put: Statement;
  private readonly del: Statement;
  private readonly purge: Statement;
  private readonly expired: Statement;
  /** Rows kept before keys were scoped to groups are still in the table (until their TTL). */
  private anyGroupRows: boolean;
  private closed = false;

  constructor(
    db: Database,
    private readonly gc: GroupCommit,
    private readonly ttlMs: number,
    private readonly now: () => number,
    private readonly log: Logger,
  ) {
    this.get = db.prepare('SELECT tool, args_hash, state, answer_json, created_ms, completed_ms FROM idempotency WHERE principal = ? AND tool_group = ? AND key = ?');
    this.put = db.prepare(`INSERT OR REPLACE INTO idempotency (principal, tool_group, key, tool, args_hash, state, answer_json, created_ms, completed_ms)
      VALUES (@principal, @group, @key, @tool, @argsHash, @state, @answer, @created, @completed)`);
    this.del = db.prepare(`DELETE FROM idempotency WHERE principal = ? AND tool_group = ? AND key = ? AND state = 'in_flight'`);
    // Read once: such rows are only ever purged, never written again.
    this.anyGroupRows = db.prepare('SELECT 1 FROM idempotency WHERE tool_group = ? LIMIT 1').get(ANY_GROUP) !== undefined;
    // The TTL counts from the call's end (a call may outlast it); created_ms <= cutoff, implied
    // by that, keeps the index on created_ms in use.
    this.purge = db.prepare(`DELETE FROM idempotency WHERE created_ms <= @cutoff AND COALESCE(completed_ms, created_ms) <= @cutoff AND state <> 'in_flight'`);
    this.expired = db.prepare(`SELECT 1 FROM idempotency WHERE created_ms <= @cutoff AND COALESCE(completed_ms, created_ms) <= @cutoff AND state <> 'in_flight' LIMIT 1`);
  }

  claim(owner: KeyOwner, key: string, tool: string, argsHash: string): IdempotencyClaim {
    if (this.closed) throw new Error('ledger is closed');
    const [principal, group] = ownerOf(owner);
    const id = mapKey(principal, group, key);
    const known = this.lookup(id, principal, group, key, tool, argsHash);
    if (known) return known;
    const entry: Live = { tool, argsHash, state: 'in_flight', created: this.now(), waiter: waiter(), pendingWrites: 0, waiters: 0 };
    this.live.set(id, entry);
    // OR REPLACE: an expired entry under the same key is purged by the new claim.
    this.write(id, entry, () =>
      this.put.run({ principal, group, key, tool, argsHash, state: 'in_flight', answer: null, created: entry.created, completed: null }),
    );
    return { kind: 'new' };
  }

  /**
   * What a claim would answer for a key that is settled: its call ended (replay, unknown), or
   * the key is another call's (conflict). Undefined when the key is free or its call still runs
   * here; nothing is claimed. Lets a caller answer such a key before it does anything else.
   */
  peek(owner: KeyOwner, key: string, tool: string, argsHash: string): IdempotencyClaim | undefined {
    if (this.closed) return undefined;
    const [principal, group] = ownerOf(owner);
    const known = this.lookup(mapKey(principal, group, key), principal, group, key, tool, argsHash);
    return known?.kind === 'wait' ? undefined : known;
  }

  /** The claim's answer for a key already known (live here, or in the table within the TTL); undefined when it is free. */
  private lookup(id: string, principal: string, group: string, key: string, tool: string, argsHash: string): IdempotencyClaim | undefined {
    const live = this.live.get(id);
    if (live && live.state !== 'abandoned') {
      if (live.tool !== tool || live.argsHash !== argsHash) return { kind: 'conflict', tool: live.tool };
      if (live.state === 'in_flight') return { kind: 'wait', result: live.waiter.promise, join: () => join(live) };
      if (live.state === 'unknown') return { kind: 'unknown' };
      return { kind: 'replay', answer: live.answer as StoredAnswer };
    }
    if (live) return undefined;
    const row = (this.get.get(principal, group, key) ?? (this.anyGroupRows ? this.get.get(principal, ANY_GROUP, key) : undefined)) as DbEntry | undefined;
    if (row && (row.completed_ms ?? row.created_ms) > this.now() - this.ttlMs) {
      if (row.tool !== tool || row.args_hash !== argsHash) return { kind: 'conflict', tool: row.tool };
      if (row.state === 'done') {
        const answer = parseAnswer(row.answer_json);
        if (answer) return { kind: 'replay', answer };
      }
      // 'unknown', an unreadable answer, or an in-flight row no live process owns.
      return { kind: 'unknown' };
    }
    return undefined;
  }

  /**
   * Whether a duplicate waits now for the answer of this key's call in flight here. A client that
   * gave up on the first request (its connection closed) and sent it again with the key waits for
   * it: the first call must then run on, not be cancelled under it (the key would be unknown).
   */
  awaited(owner: KeyOwner, key: string): boolean {
    const live = this.live.get(mapKey(...ownerOf(owner), key));
    return live !== undefined && live.state === 'in_flight' && live.waiters > 0;
  }

  /** Records the answer of a 'new' claim; waiters receive it once it is committed. */
  complete(owner: KeyOwner, key: string, answer: StoredAnswer): void {
    const [principal, group] = ownerOf(owner);
    const id = mapKey(principal, group, key);
    const entry = this.live.get(id);
    if (!entry || entry.state !== 'in_flight') {
      this.log.warn('ledger: idempotency complete() without an in-flight claim; ignored');
      return;
    }
    entry.state = 'done';
    entry.answer = answer;
    const answerJson = safeJson(answer);
    // Full row, not an UPDATE: right even if the claim's own insert failed to commit.
    const written = this.write(id, entry, () =>
      this.put.run({
        principal,
        group,
        key,
        tool: entry.tool,
        argsHash: entry.argsHash,
        state: 'done',
        answer: answerJson,
        created: entry.created,
        completed: this.now(),
      }),
    );
    // The answer is valid whether or not it became durable; waiters get it either way.
    void written.finally(() => entry.waiter.resolve(answer));
  }

  /** Drops a 'new' claim that will not run (refused before forwarding) so it can be retried. */
  abandon(owner: KeyOwner, key: string): void {
    const [principal, group] = ownerOf(owner);
    const id = mapKey(principal, group, key);
    const entry = this.live.get(id);
    if (!entry || entry.state !== 'in_flight') return;
    entry.state = 'abandoned';
    entry.waiter.reject(new IdempotencyAbandonedError());
    this.write(id, entry, () => this.del.run(principal, group, key));
  }

  /**
   * The call may or may not have taken effect (timeout, transport failure): keep the key,
   * as 'unknown', so a retry with it is refused instead of running the call twice.
   * Waiters are rejected with IdempotencyUnknownError.
   */
  markUnknown(owner: KeyOwner, key: string): void {
    const [principal, group] = ownerOf(owner);
    const id = mapKey(principal, group, key);
    const entry = this.live.get(id);
    if (!entry || entry.state !== 'in_flight') return;
    entry.state = 'unknown';
    entry.waiter.reject(new IdempotencyUnknownError());
    this.write(id, entry, () =>
      this.put.run({ principal, group, key, tool: entry.tool, argsHash: entry.argsHash, state: 'unknown', answer: null, created: entry.created, completed: this.now() }),
    );
  }

  /** Deletes expired finished entries (queued in the group commit). */
  purgeExpired(): Promise<void> {
    const cutoff = this.now() - this.ttlMs;
    // Looked up first: a read never waits for the write lock, and a DELETE, even of nothing,
    // would hold this thread for up to busy_timeout while another process (the CLI) writes.
    if (this.expired.get({ cutoff }) === undefined) return Promise.resolve();
    return this.gc.enqueue(() => {
      this.purge.run({ cutoff });
    });
  }

  /** At close: nobody will complete the running claims; their waiters must not hang. */
  close(): void {
    this.closed = true;
    for (const entry of this.live.values()) {
      if (entry.state === 'in_flight') entry.waiter.reject(new Error('ledger closed before the call completed'));
    }
  }

  private write(id: string, entry: Live, run: () => void): Promise<void> {
    entry.pendingWrites++;
    const p = this.gc.enqueue(run);
    return p
      .catch((err: unknown) => this.log.error({ err }, 'ledger: idempotency write failed'))
      .finally(() => {
        entry.pendingWrites--;
        // Once committed, the table is the truth again (in-flight entries stay: waiters).
        if (entry.state !== 'in_flight' && entry.pendingWrites === 0 && this.live.get(id) === entry) this.live.delete(id);
      });
  }
}

/** Counts one wait on a call in flight; the function returned ends it (once). */
function join(live: Live): () => void {
  live.waiters++;
  let left = false;
  return () => {
    if (left) return;
    left = true;
    live.waiters--;
  };
}

function mapKey(principal: string, group: string, key: string): string {
  return JSON.stringify([principal, group, key]);
}

function parseAnswer(json: string | null): StoredAnswer | null {
  if (json === null) return null;
  try {
    const v = JSON.parse(json) as unknown;
    if (v && typeof v === 'object' && ('result' in v || 'error' in v)) return v as StoredAnswer;
  } catch {
    /* fall through: treated as unknown */
  }
  return null;
}

/** A kept result's JSON is the text the router measured it by (resultJson): not made again. */
function safeJson(answer: StoredAnswer): string | null {
  if ('result' in answer) {
    const json = resultJson(answer.result);
    return json === undefined ? null : `{"result":${json}}`;
  }
  try {
    return JSON.stringify(answer);
  } catch {
    return null;
  }
}
