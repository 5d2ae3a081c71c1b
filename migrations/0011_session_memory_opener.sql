-- The API key that opened each remembered legacy session (src/downstream/session-memory.ts): a
-- restarted hub takes a session back only with that key, so one opened with a key removed since
-- (while the session was not held by a running hub) is "not found", as it is for the running hub
-- that ended it; a reload that removes a key deletes the rows of the sessions it opened.
-- Never the key, nor its configured SHA-256: a 128-bit digest of that hash (openerOf). '' for a
-- session opened without an API key (an OAuth token, or authentication off): it comes back for
-- its principal, as before. NULL for a row written before this column: which key opened it
-- cannot be told, so it comes back with any key of its principal (and is then bound to that
-- key), and any reload that removes a key deletes it.
ALTER TABLE session_memory ADD COLUMN opener TEXT;
