-- The resource URIs and templates each upstream's own list last showed, and the keys of those it
-- hid (src/catalog/resource-routes.ts), so after a restart of the hub a read of one of them
-- while that server is still starting answers "unavailable", not "Resource not found".
-- JSON arrays; at most 5,000 of each per server and kind.
CREATE TABLE resource_routes (
  server   TEXT    NOT NULL,
  kind     TEXT    NOT NULL CHECK (kind IN ('resources', 'resourceTemplates')),
  shown    TEXT    NOT NULL,
  hidden   TEXT    NOT NULL,
  seen_ms  INTEGER NOT NULL,
  PRIMARY KEY (server, kind)
) WITHOUT ROWID;
