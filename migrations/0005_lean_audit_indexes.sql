-- Fewer b-trees written per call. Every index on audit is written by each insert and the
-- outcome index twice more by each finish; at concurrency 32 the ledger's cost was mostly
-- these pages. The issue's query (server over time) keeps audit_server_ts; principal and
-- outcome filters now narrow a time range (audit_ts) instead. Startup recovery only needs
-- the rows still in flight, which a partial index finds without touching finished rows
-- (an entry lives only while its call runs).
DROP INDEX IF EXISTS audit_principal_ts;
DROP INDEX IF EXISTS audit_outcome_ts;
CREATE INDEX audit_in_flight ON audit (id) WHERE outcome = 'in_flight';
