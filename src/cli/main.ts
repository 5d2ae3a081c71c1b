#!/usr/bin/env node
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { startCommand } from './start.js';
import { configCommand } from './config.js';
import { ledgerCommand } from './ledger.js';
import { keysCommand } from './keys.js';
import { stdioCommand } from './stdio.js';
import { connectCommand } from './connect.js';
import { initCommand } from './init.js';
import { serversCommand } from './servers.js';
import { reloadCommand } from './reload.js';
import { doctorCommand } from './doctor.js';
import { toolsCommand } from './tools.js';
import { BadUrlError } from './daemon-client.js';

/** The `switchyard` CLI: one module per command, each thin over the library. */
await yargs(hideBin(process.argv))
  .scriptName('switchyard')
  .command(startCommand)
  .command(configCommand)
  .command(ledgerCommand)
  .command(keysCommand)
  .command(stdioCommand)
  .command(connectCommand)
  .command(initCommand)
  .command(serversCommand)
  .command(reloadCommand)
  .command(doctorCommand)
  .command(toolsCommand)
  .demandCommand(1, 'Give a command; see --help.')
  .strict()
  .help()
  .fail((msg, err, y) => {
    // A bad --url is the user's to fix: one line, not the help and a stack.
    if (err instanceof BadUrlError) {
      process.stderr.write(`switchyard: ${err.message}\n`);
      process.exit(2);
    }
    if (err) throw err;
    y.showHelp();
    process.stderr.write(`\n${msg}\n`);
    process.exit(1);
  })
  .parseAsync();
