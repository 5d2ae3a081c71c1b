-- What each upstream offered when it was last ready (src/hub/known-capabilities.ts), so a hub
-- that starts again answers `initialize` and `server/discover` with its families while the
-- upstream itself is still starting: a legacy session keeps the capabilities of its handshake.
CREATE TABLE server_capabilities (
  server        TEXT    NOT NULL PRIMARY KEY,
  capabilities  TEXT    NOT NULL,
  seen_ms       INTEGER NOT NULL
) WITHOUT ROWID;
