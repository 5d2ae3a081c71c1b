/**
 * The last argument of a catalog 'changed' event that is of the server's own connection's list
 * alone (its list_changed, a change found on its refresh, its list back after failing):
 * principals whose list of that server comes from their own connection are not told
 * (Catalog.listsOwn); a change of theirs is said on that connection.
 */
export const SHARED_ONLY = 'shared';
