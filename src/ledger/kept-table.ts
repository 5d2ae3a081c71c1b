import type { Statement } from 'better-sqlite3';
import type { Logger } from '../log.js';
import type { GroupCommit } from './group-commit.js';

/**
 * A small table read whole at open and kept in memory (hub names, server capabilities, resource
 * routes), whose puts are written by the group commit: no disk write on the caller's path. A
 * lost write only means the fact is learnt afresh after a restart; the memory stays right for
 * this process either way.
 */
export abstract class KeptTable {
  protected constructor(
    private readonly gc: GroupCommit,
    protected readonly now: () => number,
    private readonly log: Logger,
  ) {}

  protected writeLater(stmt: Statement, row: object, what: string, context: Record<string, unknown>): void {
    this.gc
      .enqueue(() => {
        stmt.run(row);
      })
      .catch((err: unknown) => this.log.error({ err, ...context }, `ledger: could not store ${what}`));
  }
}

/** A JSON array of strings, as a kept table stores lists; anything else (a row edited by hand) is none. */
export function jsonStrings(json: string): string[] {
  try {
    const v: unknown = JSON.parse(json);
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}
