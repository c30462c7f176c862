-- Rows a backfill is to read again at their new key: an update moved each to another key without
-- resending a TOASTed value, from the part of its table the backfill had yet to read (docs/backfills.md).
-- Kept in memory only, such a row moved before a restart (a paused backfill's, waiting for its resume)
-- was never read again after it, and its consumer never had the value. Written before the update's
-- position is acknowledged; deleted once the row is read again, or when its table is read again from
-- its start, or the backfill ends. row_key: the chunk key's values as text; moved_at: the update's position.
CREATE TABLE ${flyway:defaultSchema}.backfill_moved (
    backfill_id  uuid    NOT NULL REFERENCES ${flyway:defaultSchema}.backfill (id) ON DELETE CASCADE,
    table_name   text    NOT NULL,
    row_key      text[]  NOT NULL,
    moved_at     pg_lsn  NOT NULL,
    PRIMARY KEY (backfill_id, table_name, row_key, moved_at)
);
