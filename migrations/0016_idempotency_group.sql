-- Idempotency keys are scoped to the principal and the endpoint (tool group) the call came
-- through: `/mcp/<group>`, `switchyard stdio --group`, or '' for `/mcp` and a plain stdio.
-- A principal's API keys limited to different groups (`auth.apiKeys[].groups`) are kept apart
-- by those groups; a key shared across them let one group's client replay, or be refused by,
-- a call of another group's. '' rather than NULL: a WITHOUT ROWID key column is NOT NULL.
-- The rows kept before this version get '*' (not a group name, whose pattern is
-- [A-Za-z0-9_-]): their endpoint is not known, so they are looked up from every endpoint, as
-- they were, until ledger.idempotencyTtl drops them; a retry across the upgrade still replays.
CREATE TABLE idempotency_scoped (
  principal    TEXT    NOT NULL,
  tool_group   TEXT    NOT NULL DEFAULT '',
  key          TEXT    NOT NULL,
  tool         TEXT    NOT NULL,
  args_hash    TEXT    NOT NULL,
  state        TEXT    NOT NULL CHECK (state IN ('in_flight', 'done', 'unknown')),
  answer_json  TEXT,
  created_ms   INTEGER NOT NULL,
  completed_ms INTEGER,
  PRIMARY KEY (principal, tool_group, key)
) WITHOUT ROWID;
INSERT INTO idempotency_scoped (principal, tool_group, key, tool, args_hash, state, answer_json, created_ms, completed_ms)
  SELECT principal, '*', key, tool, args_hash, state, answer_json, created_ms, completed_ms FROM idempotency;
DROP TABLE idempotency;
ALTER TABLE idempotency_scoped RENAME TO idempotency;
CREATE INDEX idempotency_created ON idempotency (created_ms);
