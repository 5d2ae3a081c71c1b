-- Pinned tool definitions (rug-pull defence, src/catalog/pins.ts): the approved definition of
-- every tool a server listed, by canonical hash, and a changed definition waiting for
-- `switchyard tools approve`. Read once at open into memory (src/ledger/pins.ts); the hub
-- writes through the group commit; the CLI approves with a plain UPDATE, which the hub
-- notices through PRAGMA data_version.
CREATE TABLE tool_pins (
  server             TEXT    NOT NULL,
  tool               TEXT    NOT NULL,              -- upstream tool name
  hash               TEXT,                          -- approved definition; NULL = never approved (a rename)
  body_hash          TEXT,                          -- the approved definition without its name
  definition         TEXT,                          -- canonical JSON of the approved definition
  pending_hash       TEXT,                          -- a later definition waiting for approval
  pending_body_hash  TEXT,
  pending_definition TEXT,
  pending_reason     TEXT CHECK (pending_reason IN ('changed', 'renamed')),
  renamed_from       TEXT,
  first_seen_ms      INTEGER NOT NULL,
  approved_ms        INTEGER,
  approved_by        TEXT,                          -- 'first-seen' | 'cli' | 'auto-trusted'
  pending_since_ms   INTEGER,
  PRIMARY KEY (server, tool)
) WITHOUT ROWID;
