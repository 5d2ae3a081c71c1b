import type { Argv, CommandModule } from 'yargs';
import { inFlightNote, screenJson, screenText } from '../../ledger/format.js';
import { formatWitness, parseWitness, type VerifyResult, type Witness } from '../../ledger/chain.js';
import { counted } from '../../counted.js';
import { UsageError } from '../usage-error.js';
import type { LedgerCliIo } from './io.js';
import type { CommonArgs } from './ledger-file.js';
import { subcommandRunner } from './run.js';

type VerifyArgs = CommonArgs & { witness?: string[]; json: boolean };

/** `--witness` values as typed: each a head an earlier verify printed, else exit 2. */
export function witnessesOf(texts: readonly string[] | undefined): Witness[] {
  return (texts ?? []).map((text) => {
    const w = parseWitness(text);
    if (!w) throw new UsageError(`--witness ${JSON.stringify(text)} is not <seq>:<64 hex digits>, as verify prints the head`);
    return w;
  });
}

/** What verify writes to stdout, each string one write: the head, to be kept as a witness, on a line of its own. */
export function verifyLines(r: VerifyResult, json: boolean): string[] {
  if (json) {
    const body = r.ok ? { ...r, head: formatWitness({ seq: r.headSeq, hash: r.headHash }) } : r;
    return [screenJson(JSON.stringify(body)) + '\n'];
  }
  if (r.ok) {
    const held = r.witnesses ? `, ${counted(r.witnesses, 'witness', 'witnesses')} held` : '';
    // No row in the chain: "chain seq 1..0" (7..6 once pruned) read as a range gone wrong.
    const span = r.rows > 0 ? `chain seq ${r.anchorSeq + 1}..${r.headSeq}` : r.anchorSeq > 0 ? `none after seq ${r.anchorSeq}, where it was pruned` : 'no row written yet';
    return [`ok: ${counted(r.rows, 'row')} verified (${span})${held}\n`, `head: ${formatWitness({ seq: r.headSeq, hash: r.headHash })}\n`];
  }
  const where = r.rowId === null && r.seq === null ? '' : ` at row ${r.rowId ?? '-'} (seq ${r.seq ?? '-'})`;
  return [screenText(`FAILED${where}: ${r.reason}`) + '\n'];
}

/** `ledger verify`: the hash chain and any witnesses; exit 1 when it does not hold. */
export function verifyCommand(io: LedgerCliIo): CommandModule<CommonArgs, VerifyArgs> {
  return {
    command: 'verify',
    describe: 'Check the hash chain (and witnesses kept elsewhere); exit 1 naming the first row that does not match',
    builder: (y) =>
      y
        .option('witness', {
          type: 'string',
          array: true,
          // Its value left out (`verify --witness` of a script whose variable is unset), the chain
          // was verified against no witness at all, and passed.
          requiresArg: true,
          describe: 'A head printed by an earlier verify (<seq>:<hash>), kept outside this file: its row must still hold that hash',
        })
        .option('json', { type: 'boolean', default: false, describe: 'One JSON object' }) as unknown as Argv<VerifyArgs>,
    handler: subcommandRunner(io)(
      'verify',
      false,
      (a: VerifyArgs) => witnessesOf(a.witness),
      (reader, a, witnesses) => {
        const r = reader.verify(witnesses);
        for (const line of verifyLines(r, a.json)) io.out(line);
        if (r.ok && r.inFlight.rows > 0) io.err(`switchyard ledger verify: note: ${inFlightNote(r.inFlight)}\n`);
        if (!r.ok) io.setExitCode(1);
      },
    ),
  };
}
