-- The legacy HTTP sessions open at this hub (src/downstream/session-memory.ts), and what each
-- gathered there: its resource subscriptions and log level. A restarted hub takes back a session
-- its own ledger issued (the id carries the handshake: src/downstream/session-ids.ts) only while
-- its row is here, and gives it what it had; a session that ended (DELETE, idleness, room for
-- another, a revoked key) has no row, so its id stays "not found" after a restart too.
-- Keyed by the SHA-256 of the session id: the id itself is never stored. Rows untouched for
-- 30 days are pruned at open (an open session's row is touched once a day while it is used).
CREATE TABLE session_memory (
  session        TEXT    NOT NULL PRIMARY KEY,
  subscriptions  TEXT    NOT NULL,
  log_level      TEXT,
  updated_ms     INTEGER NOT NULL
) WITHOUT ROWID;

-- This ledger file's own id, sealed into the session ids it issues: a session another hub's
-- ledger issued is taken back without a row here (that hub keeps its memory).
CREATE TABLE ledger_meta (
  name   TEXT NOT NULL PRIMARY KEY,
  value  TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO ledger_meta (name, value) VALUES ('id', lower(hex(randomblob(16))));
