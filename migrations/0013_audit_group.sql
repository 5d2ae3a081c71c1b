-- The tool group whose endpoint a request came through (`/mcp/<group>`, `switchyard stdio
-- --group`); NULL for `/mcp` and a plain `switchyard stdio`, and for every row written before
-- this column. Named tool_group, not group (an SQL keyword); `ledger query --json` shows it as
-- `group`. The hash chain covers it (src/ledger/chain.ts): a row's digest leaves null columns
-- out, so the rows already chained verify as they did, and a group edited by hand fails verify.
-- No index: like principal and outcome (0005), a group filter narrows a time range (audit_ts),
-- and an index would be one more b-tree written by every call through a group.
ALTER TABLE audit ADD COLUMN tool_group TEXT;
