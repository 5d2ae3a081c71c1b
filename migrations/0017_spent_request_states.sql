-- The hub's own MRTR requestStates spent at this hub (src/router/request-state.ts): each is
-- single use, and a hub that kept the spent ones only in memory took one again after a
-- restart, so a modern client's answer to the hub's confirmation (policy.confirm), sent again,
-- ran the confirmed call again without the user asked. Keyed by the state's random nonce (the
-- state itself is never stored); a row is useless once its state has expired (expires_ms,
-- epoch ms), and goes at the next start or sweep.
CREATE TABLE spent_request_states (
  nonce       TEXT    NOT NULL PRIMARY KEY,
  expires_ms  INTEGER NOT NULL
) WITHOUT ROWID;
