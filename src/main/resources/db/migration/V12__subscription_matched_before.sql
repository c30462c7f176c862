-- What a stored subscription matched (its tables, operations and filter) before an edit changed it,
-- and the WAL position of the edit: a change committed before that position is routed as the
-- subscription matched then, whenever it is routed (late, or sent again after a crash). Rows the
-- slot's acknowledged position has passed are no longer needed and are deleted.
CREATE TABLE ${flyway:defaultSchema}.subscription_matched_before (
    subscription_id  uuid    NOT NULL REFERENCES ${flyway:defaultSchema}.subscription (id) ON DELETE CASCADE,
    until_lsn        pg_lsn  NOT NULL,
    matching         jsonb   NOT NULL,
    PRIMARY KEY (subscription_id, until_lsn)
);
