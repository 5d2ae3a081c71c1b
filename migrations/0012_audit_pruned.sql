-- Ids of audit rows `ledger prune` deleted while a pending file still held a line of theirs
-- (src/ledger/reader.ts, LedgerReader.prune). A pending file can hold the lines of rows already
-- in SQLite until it is emptied, and a start applies every line whose row it does not find: a
-- pruned row looked like one that never arrived and came back (a begin as `unknown`). A replay
-- skips the ids listed here. Only ids a pending file held at the prune are listed, so the table
-- stays as small as those files; a hub empties it at its start, once it has emptied the files.
CREATE TABLE audit_pruned (
  id INTEGER PRIMARY KEY
);
