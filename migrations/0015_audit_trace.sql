-- The request's span in a W3C trace (src/protocol/trace-context.ts): the trace id (32 hex), the
-- hub's own span id (16 hex) and the span id of the caller it came from, when it came with a valid
-- traceparent (null when the hub started the trace). What a hub forwards names its span as the
-- parent, so a call through two chained hubs has one trace id in both ledgers, and the inner
-- row's parent_span_id is the outer row's span_id. NULL in every row written before this
-- column. The hash chain covers them as it does tool_group (0013): a row's digest leaves null
-- columns out, so rows chained before verify as they did, and an edited id fails verify.
-- No index: every new row has a trace id, and ids are random, so each insert would dirty a
-- leaf page of its own at the index's every batch (a write ~4 KiB per row to the WAL on a large
-- ledger); `ledger query --trace-id` walks the audit_ts range instead, `--since` narrows it.
ALTER TABLE audit ADD COLUMN trace_id TEXT;
ALTER TABLE audit ADD COLUMN span_id TEXT;
ALTER TABLE audit ADD COLUMN parent_span_id TEXT;
