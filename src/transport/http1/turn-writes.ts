import { atTurnEnd, WRITE } from '../../turn-end.js';

/** A connection holding answers until the end of the turn. */
export interface Holder {
  /** Write what it holds. */
  release(): void;
}

/**
 * Whole answers held until the end of the turn of the event loop (its WRITE stage, after the
 * ledger's commit: src/turn-end.ts) and written together then. The first answer of a turn is
 * written at once, so the only call (concurrency 1) never waits; the edge decides which of the
 * others are held (Http1Connection.send).
 *
 * Why: with answers written as they were ready, a busy hub woke its clients one answer at a
 * time, and their next requests came back one per read. Released together, they come back
 * together, and every read and poll of the hub serves more of them: at concurrency 64 with
 * the ledger off, about 50 % more cached `tools/list` per second, 25 % more `tools/call` in
 * front of an HTTP upstream and 6 % in front of stdio, each for less CPU per call
 * (docs/BENCHMARKS.md, "Answers that leave together"). With the ledger on, answers already
 * left together, released by the pending file's end-of-turn write.
 */
export class TurnWrites {
  private open = false;
  private holders: Holder[] = [];
  private readonly end = (): void => {
    this.open = false;
    const holders = this.holders;
    if (holders.length === 0) return;
    this.holders = [];
    for (const h of holders) h.release();
  };

  /** True for the first answer of this turn, which is written now; later ones are held. */
  first(): boolean {
    if (this.open) return false;
    this.openTurn();
    return true;
  }

  /** `h` holds an answer: release it when the turn ends. Once per holder and turn. */
  hold(h: Holder): void {
    if (!this.open) this.openTurn();
    this.holders.push(h);
  }

  private openTurn(): void {
    this.open = true;
    atTurnEnd(WRITE, this.end);
  }
}
