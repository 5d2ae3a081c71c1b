-- Definitions of a tool approved before its current one (src/catalog/pins.ts, PinRecord.variants):
-- JSON array of hashes, NULL = none. An approval keeps the one it replaces, so an upstream that
-- serves each user its own version of a tool (per-principal credentials) has each approved once,
-- instead of every approval swapping the quarantine to the other user.
ALTER TABLE tool_pins ADD COLUMN variants TEXT;
