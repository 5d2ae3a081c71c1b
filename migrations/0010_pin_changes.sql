-- How a running hub learns of tool pins changed by another process (an approval by the CLI, or
-- any UPDATE or INSERT of tool_pins), without reading the table (src/ledger/pins.ts): it used to
-- re-read every pin whenever PRAGMA data_version moved, which the hub's own ledger thread moves
-- after each batch, so every 500 ms under traffic (seconds of its event loop with 80k pins).
--
-- pin_changes.seq counts such changes; each changed row takes the count in change_seq. The hub
-- reads the one row of pin_changes, and when it moved, only the rows whose change_seq is newer.
-- The hub's own writes count hub_writes up (src/ledger/pins.ts PIN_UPSERT): a write that leaves
-- hub_writes as it was (an insert without it) came from elsewhere and is counted by the
-- triggers; the hub's own are not (it holds them already). Not part of the audit hash chain.
-- A deleted row is not counted (nothing deletes pins): a running hub keeps it until it restarts.
CREATE TABLE pin_changes (
  id   INTEGER PRIMARY KEY CHECK (id = 1),
  seq  INTEGER NOT NULL
);
INSERT INTO pin_changes (id, seq) VALUES (1, 0);

ALTER TABLE tool_pins ADD COLUMN change_seq INTEGER;  -- pin_changes.seq of the last change from elsewhere; NULL: none
ALTER TABLE tool_pins ADD COLUMN hub_writes INTEGER;  -- counted up by each write of the hub; NULL: none yet
CREATE INDEX tool_pins_change_seq ON tool_pins (change_seq) WHERE change_seq IS NOT NULL;

-- UPDATE OF every column but change_seq and hub_writes: the triggers' own UPDATE does not fire
-- them again (even with recursive_triggers on). A migration adding a column adds it here.
CREATE TRIGGER tool_pins_changed_update
AFTER UPDATE OF server, tool, hash, body_hash, definition, pending_hash, pending_body_hash, pending_definition,
  pending_reason, renamed_from, first_seen_ms, approved_ms, approved_by, pending_since_ms, variants ON tool_pins
WHEN NEW.hub_writes IS OLD.hub_writes
BEGIN
  UPDATE pin_changes SET seq = seq + 1 WHERE id = 1;
  UPDATE tool_pins SET change_seq = (SELECT seq FROM pin_changes WHERE id = 1) WHERE server = NEW.server AND tool = NEW.tool;
END;

CREATE TRIGGER tool_pins_changed_insert
AFTER INSERT ON tool_pins
WHEN NEW.hub_writes IS NULL
BEGIN
  UPDATE pin_changes SET seq = seq + 1 WHERE id = 1;
  UPDATE tool_pins SET change_seq = (SELECT seq FROM pin_changes WHERE id = 1) WHERE server = NEW.server AND tool = NEW.tool;
END;
