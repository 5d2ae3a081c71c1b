-- The tool group whose endpoint a request came through (`/mcp/<group>`, `switchyard stdio
-- --group`); NULL for `/mcp` and a plain `switchyard stdio`, and for every row written before
-- this column. Named tool_group, not group (an SQL keyword); `ledger query --json` shows it as
-- `group`. The hash chain covers it (src/ledger/chain.ts): a row's digest leaves null columns
-- out, so the rows already chained verify as they did, and a group edited by hand fails verify.
-- A partial index: a call through `/mcp` writes no entry, one through a group one (its ts only
-- grows, so entries go to the end of the group's range; a finish changes neither column and
-- leaves it alone). Without it, `ledger query --group G` of a group seldom used walked the
-- whole audit_ts index (1,000,000 rows) for its few rows.
ALTER TABLE audit ADD COLUMN tool_group TEXT;
CREATE INDEX audit_group_ts ON audit (tool_group, ts) WHERE tool_group IS NOT NULL;
