/**
 * The end of a turn in two stages (src/turn-end.ts): what a commit's resolution leads to leaves
 * in the same turn. "This turn" is observed with an immediate queued after the stages: it runs
 * in the same check phase, after them; an immediate opened from inside the check phase runs
 * only after it.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Socket } from 'node:net';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { PendingLog } from '../../src/ledger/pending-log.js';
import { StdioChild } from '../../src/transport/stdio-child.js';
import { TurnWrites } from '../../src/transport/http1/turn-writes.js';
import { atTurnEnd, COMMIT, WRITE } from '../../src/turn-end.js';
import { tempDir } from './ledger-helpers.js';

/** A call's own hops between its row's commit and what it does next (awaits in the router). */
async function hops(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await null;
}

/** Resolves with `events` once the immediate queued now has run (the end of this turn). */
function endOfTurn(events: string[]): Promise<string[]> {
  return new Promise((r) =>
    setImmediate(() => {
      events.push('end of turn');
      r(events);
    }),
  );
}

describe('atTurnEnd', () => {
  it('runs COMMIT before WRITE, and a WRITE queued by what a commit resolves in the same turn', async () => {
    const events: string[] = [];
    let commit!: () => void;
    const committed = new Promise<void>((r) => (commit = r));
    void committed.then(async () => {
      await hops(5);
      atTurnEnd(WRITE, () => events.push('write after the commit'));
    });
    atTurnEnd(WRITE, () => events.push('write'));
    atTurnEnd(COMMIT, () => {
      events.push('commit');
      commit();
    });
    expect(await endOfTurn(events)).toEqual(['commit', 'write', 'write after the commit', 'end of turn']);
  });

  it('a COMMIT queued after its stage ran runs in the next turn, even with nothing else queued', async () => {
    const events: string[] = [];
    atTurnEnd(COMMIT, () => {
      queueMicrotask(() => atTurnEnd(COMMIT, () => events.push('late commit')));
    });
    await endOfTurn(events);
    expect(events).toEqual(['end of turn']);
    await endOfTurn(events);
    expect(events).toEqual(['end of turn', 'late commit', 'end of turn']);
  });

  it('a WRITE queued by a WRITE runs in the next turn', async () => {
    const events: string[] = [];
    atTurnEnd(WRITE, () => atTurnEnd(WRITE, () => events.push('write from a write')));
    await endOfTurn(events);
    expect(events).toEqual(['end of turn']);
    await endOfTurn(events);
    expect(events).toEqual(['end of turn', 'write from a write', 'end of turn']);
  });

  it('a task that throws does not keep the others of its stage from running; its error is thrown after them', () => {
    // In a process of its own, which reports what an uncaught error would otherwise end.
    const dist = resolve('dist/src/turn-end.js');
    expect(existsSync(dist), 'dist is built by the global setup (npx tsc -p .)').toBe(true);
    const script = `
      const { atTurnEnd, COMMIT, WRITE } = await import(${JSON.stringify(pathToFileURL(dist).href)});
      const events = [];
      process.on('uncaughtException', (err) => events.push('uncaught: ' + err.message));
      atTurnEnd(WRITE, () => { throw new Error('first'); });
      atTurnEnd(WRITE, () => events.push('write'));
      atTurnEnd(WRITE, () => { throw new Error('second'); });
      atTurnEnd(COMMIT, () => { throw new Error('commit'); });
      atTurnEnd(COMMIT, () => events.push('commit'));
      setImmediate(() => setImmediate(() => console.log(JSON.stringify(events))));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual(['commit', 'uncaught: commit', 'write', 'uncaught: first']);
  });
});

describe('the pending file, stdio frames and answers share the end of the turn', () => {
  let t: ReturnType<typeof tempDir> | undefined;
  let log: PendingLog | undefined;
  let child: StdioChild | undefined;
  afterEach(async () => {
    log?.close(true);
    await child?.close();
    t?.cleanup();
    log = child = t = undefined;
  });

  const openLog = (): PendingLog => {
    t = tempDir();
    return (log = new PendingLog(`${t.db}-pending`));
  };

  it('a frame sent once its row is written leaves in the turn of the write, not the next', async () => {
    const pending = openLog();
    child = new StdioChild({ command: process.execPath, args: ['-e', 'process.stdin.resume()'], maxFrameBytes: 1024, log: silentLogger });
    const events: string[] = [];
    // Watches the pipe's writes (the child's stdin is a net.Socket).
    const real = Socket.prototype.write;
    Socket.prototype.write = function (this: Socket, ...args: Parameters<Socket['write']>) {
      if (String(args[0]).includes('"method":"forwarded"')) events.push('frame written');
      return real.apply(this, args);
    } as Socket['write'];
    try {
      // Joined (a busy hub): the row is written at the end of the turn, then the call goes on.
      void pending.append('{"row":1}', true).then(async () => {
        await hops(3);
        child!.send('{"jsonrpc":"2.0","method":"forwarded"}', true);
      });
      expect(await endOfTurn(events)).toEqual(['frame written', 'end of turn']);
    } finally {
      Socket.prototype.write = real;
    }
  });

  it('an answer held once its row is written is released in the turn of the write', async () => {
    const pending = openLog();
    const turn = new TurnWrites();
    const events: string[] = [];
    void pending.append('{"row":1}', true).then(async () => {
      await hops(3);
      turn.hold({ release: () => events.push('answer released') });
    });
    expect(await endOfTurn(events)).toEqual(['answer released', 'end of turn']);
  });
});
