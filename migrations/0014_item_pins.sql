-- Pinned prompts, resources and resource templates (rug-pull defence beyond tools,
-- src/catalog/pins.ts): what tool_pins keeps of a tool, kept of the other listed items, by kind.
-- `name` is the item's key in its upstream's list: a prompt's name, a resource's uri, a
-- template's uriTemplate. The columns mean what tool_pins' do (0004, 0006, 0010); a prompt and a
-- tool of one server may share a name, hence a table of its own rather than rows of tool_pins.
-- Changes made elsewhere (the CLI's approval) are counted in the same pin_changes row, by
-- triggers of the same shape: a running hub reads only the rows changed since it last looked.
CREATE TABLE item_pins (
  kind               TEXT    NOT NULL CHECK (kind IN ('prompts', 'resources', 'resourceTemplates')),
  server             TEXT    NOT NULL,
  name               TEXT    NOT NULL,
  hash               TEXT,
  body_hash          TEXT,
  definition         TEXT,
  pending_hash       TEXT,
  pending_body_hash  TEXT,
  pending_definition TEXT,
  pending_reason     TEXT CHECK (pending_reason IN ('changed', 'renamed')),
  renamed_from       TEXT,
  first_seen_ms      INTEGER NOT NULL,
  approved_ms        INTEGER,
  approved_by        TEXT,
  pending_since_ms   INTEGER,
  variants           TEXT,
  change_seq         INTEGER,
  hub_writes         INTEGER,
  PRIMARY KEY (server, kind, name)
) WITHOUT ROWID;
CREATE INDEX item_pins_change_seq ON item_pins (change_seq) WHERE change_seq IS NOT NULL;

-- As tool_pins_changed_update / _insert (0010): every column but change_seq and hub_writes.
CREATE TRIGGER item_pins_changed_update
AFTER UPDATE OF kind, server, name, hash, body_hash, definition, pending_hash, pending_body_hash, pending_definition,
  pending_reason, renamed_from, first_seen_ms, approved_ms, approved_by, pending_since_ms, variants ON item_pins
WHEN NEW.hub_writes IS OLD.hub_writes
BEGIN
  UPDATE pin_changes SET seq = seq + 1 WHERE id = 1;
  UPDATE item_pins SET change_seq = (SELECT seq FROM pin_changes WHERE id = 1) WHERE server = NEW.server AND kind = NEW.kind AND name = NEW.name;
END;

CREATE TRIGGER item_pins_changed_insert
AFTER INSERT ON item_pins
WHEN NEW.hub_writes IS NULL
BEGIN
  UPDATE pin_changes SET seq = seq + 1 WHERE id = 1;
  UPDATE item_pins SET change_seq = (SELECT seq FROM pin_changes WHERE id = 1) WHERE server = NEW.server AND kind = NEW.kind AND name = NEW.name;
END;
