-- Idempotency keys, scoped to the principal that sent them.
-- state: in_flight (a call is running), done (answer_json holds what to replay),
-- unknown (the process ended mid-call; the outcome cannot be known).
CREATE TABLE idempotency (
  principal    TEXT    NOT NULL,
  key          TEXT    NOT NULL,
  tool         TEXT    NOT NULL,
  args_hash    TEXT    NOT NULL,
  state        TEXT    NOT NULL CHECK (state IN ('in_flight', 'done', 'unknown')),
  answer_json  TEXT,
  created_ms   INTEGER NOT NULL,
  completed_ms INTEGER,
  PRIMARY KEY (principal, key)
) WITHOUT ROWID;

CREATE INDEX idempotency_created ON idempotency (created_ms);

-- The CLI's and the hub's usual questions: by server over time, by principal over time,
-- by outcome (also how in-flight rows are found at startup).
CREATE INDEX audit_server_ts ON audit (server, ts);
CREATE INDEX audit_principal_ts ON audit (principal, ts);
CREATE INDEX audit_outcome_ts ON audit (outcome, ts);
