/** A connection holding answers until the end of the turn. */
export interface Holder {
  /** Write what it holds. */
  release(): void;
}

/**
 * Whole answers written in one turn of the event loop: the first leaves at once, the others
 * together when the turn ends (setImmediate). A lone call (concurrency 1) never waits, as its
 * answer is the first of its turn.
 *
 * Why: with answers written as they were ready, a busy hub woke its clients one answer at a
 * time, and their next requests came back one per read. Released together, they come back
 * together, and every read and poll of the hub serves more of them: at concurrency 64 in
 * front of stdio, 15 % more `tools/call` per second for 15 % less CPU per call, and 45 % more
 * cached `tools/list` (docs/BENCHMARKS.md, "Answers that leave together"). With the ledger on,
 * answers already left together, released by the pending file's end-of-turn write.
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
    this.open = true;
    setImmediate(this.end);
    return true;
  }

  /** `h` holds an answer: release it when the turn ends. Once per holder and turn. */
  hold(h: Holder): void {
    this.holders.push(h);
  }
}
