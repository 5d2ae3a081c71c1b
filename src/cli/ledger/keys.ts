import type { Argv, CommandModule } from 'yargs';
import { KEY_HEADER, keyCells, keyJson } from '../../ledger/format.js';
import type { KeyRow } from '../../ledger/reader.js';
import { clockOf, type LedgerCliIo } from './io.js';
import { type CommonArgs, resolveKeyTtlMs } from './ledger-file.js';
import { ledgerNotes } from './notes.js';
import { nameFilter, oneText, wholeNumber } from './options.js';
import { rowsOut } from './rows-out.js';
import { subcommandRunner } from './run.js';

type KeysArgs = CommonArgs & { principal?: string | string[]; key?: string | string[]; state?: string | string[]; limit: number; json: boolean };

/** `ledger keys`: the idempotency keys and what a retry with each gets. */
export function keysCommand(io: LedgerCliIo): CommandModule<CommonArgs, KeysArgs> {
  const now = clockOf(io);
  const { writePaged } = rowsOut(io);
  const { noRows } = ledgerNotes(io);
  return {
    command: 'keys',
    describe: 'List idempotency keys: their tool, state, and what a retry with each gets (never the kept answer)',
    builder: (y) =>
      y
        .option('principal', { type: 'string', describe: 'Only keys of this principal' })
        .option('key', { type: 'string', describe: 'Only this key' })
        .option('state', { type: 'string', choices: ['in_flight', 'done', 'unknown'], describe: 'Only keys in this state (unknown: the call may have run and left no answer; a retry is refused)' })
        .option('limit', { type: 'number', default: 50, describe: 'At most this many keys, the latest' })
        .option('json', { type: 'boolean', default: false, describe: 'One JSON object per line' }) as unknown as Argv<KeysArgs>,
    handler: subcommandRunner(io)(
      'keys',
      false,
      (a: KeysArgs) => ({
        filter: { principal: nameFilter('--principal', a.principal), key: nameFilter('--key', a.key, 'an idempotency key'), state: oneText('--state', a.state) as KeyRow['state'] | undefined },
        limit: wholeNumber('--limit', a.limit, 1),
        // Keys ended before this count as absent to a retry (the hub's lookup), though not yet purged.
        expiredBefore: now() - resolveKeyTtlMs(a),
      }),
      async (reader, a, o) => {
        // Written as read, a page at a time, as query's rows are (reader.keyIds).
        const ids = reader.keyIds(o.filter, o.limit);
        if (ids.length === 0) return noRows('keys', a.json, 'idempotency keys');
        const { shown } = await writePaged(
          () => reader.keysOf(ids),
          a.json ? (k) => keyJson(k, o.expiredBefore) : undefined,
          KEY_HEADER,
          (k) => keyCells(k, o.expiredBefore),
        );
        if (!a.json && ids.length === o.limit) io.err(`switchyard ledger keys: note: the latest ${shown === 1 ? 'matching key' : `${shown} matching keys`}; more may match (--limit N shows more)\n`);
      },
    ),
  };
}
