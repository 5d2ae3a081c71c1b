-- Hub names given to upstream tools and prompts, so a name stays the same across restarts
-- and config changes (a server added before another must not take over its names).
-- Read once at open into memory (src/ledger/names.ts); written through the group commit.
CREATE TABLE names (
  server        TEXT    NOT NULL,
  kind          TEXT    NOT NULL CHECK (kind IN ('tool', 'prompt')),
  upstream_name TEXT    NOT NULL,
  hub_name      TEXT    NOT NULL,
  assigned_ms   INTEGER NOT NULL,
  PRIMARY KEY (server, kind, upstream_name)
) WITHOUT ROWID;
