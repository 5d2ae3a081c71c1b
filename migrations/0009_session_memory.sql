-- What a legacy HTTP session gathered at the hub (src/downstream/session-memory.ts): its
-- resource subscriptions and log level, so a restarted hub that takes the session back (its id
-- carries the handshake: src/downstream/session-ids.ts) takes them back too. Keyed by the
-- SHA-256 of the session id: the id itself is never stored. A row goes when its session ends
-- (DELETE, idleness, room for another, a revoked key); rows untouched for 30 days are pruned at open.
CREATE TABLE session_memory (
  session        TEXT    NOT NULL PRIMARY KEY,
  subscriptions  TEXT    NOT NULL,
  log_level      TEXT,
  updated_ms     INTEGER NOT NULL
) WITHOUT ROWID;
