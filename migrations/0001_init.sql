-- The audit trail: one row per downstream request.
-- A row is inserted as 'in_flight' when the call begins and finalized once; only finalized
-- rows carry a chain position (seq) and hash (see src/ledger/chain.ts).
-- AUTOINCREMENT so ids are never reused after pruning (the CLI's tail and the writer's
-- in-process id allocation rely on ids only growing).
CREATE TABLE audit (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  ts              INTEGER NOT NULL,            -- epoch ms when the request arrived
  request_id      TEXT    NOT NULL,
  principal       TEXT    NOT NULL,
  client_address  TEXT,
  client_era      TEXT    NOT NULL,
  client_name     TEXT,
  client_version  TEXT,
  method          TEXT    NOT NULL,
  hub_name        TEXT,                        -- tool/prompt name as the client saw it, or resource uri
  server          TEXT,
  upstream_name   TEXT,
  upstream_era    TEXT,
  outcome         TEXT    NOT NULL,
  error_kind      TEXT,
  error_code      INTEGER,
  error_message   TEXT,
  latency_ms      REAL,
  request_bytes   INTEGER,
  response_bytes  INTEGER,
  idempotency_key TEXT,
  args_hash       TEXT,
  args_json       TEXT,                        -- only with ledger.storeBodies, redacted
  result_json     TEXT,                        -- only with ledger.storeBodies, redacted
  seq             INTEGER UNIQUE,              -- chain position, set at finalization
  hash            TEXT                         -- sha256(prev hash || canonical row)
);

CREATE INDEX audit_ts ON audit (ts);

-- Where the hash chain starts (after pruning) and where it ends (to notice a cut tail).
CREATE TABLE chain_state (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  anchor_seq  INTEGER NOT NULL,
  anchor_hash TEXT    NOT NULL,
  head_seq    INTEGER NOT NULL,
  head_hash   TEXT    NOT NULL
);

INSERT INTO chain_state (id, anchor_seq, anchor_hash, head_seq, head_hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000',
           0, '0000000000000000000000000000000000000000000000000000000000000000');
