-- Backfills: a subscription's existing rows, read in chunks by key while streaming goes on
-- (docs/backfills.md). progress holds, per table in the order read, the last key done (its columns'
-- text values), the rows sent and whether the table is done: a backfill resumes from there after a
-- restart or failover. origin 'initial' marks the one a configured subscription's BACKFILL=initial
-- started, so that a restart does not start it again.
CREATE TABLE ${flyway:defaultSchema}.backfill (
    id                   uuid        PRIMARY KEY,
    subscription_id      text        NOT NULL,
    origin               text        NOT NULL DEFAULT 'api',
    state                text        NOT NULL,
    tables               text[]      NOT NULL,
    filter               text,
    chunk_size           integer     NOT NULL,
    max_rows_per_second  integer,
    progress             jsonb       NOT NULL DEFAULT '{}',
    error                text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    finished_at          timestamptz
);
CREATE INDEX backfill_by_subscription ON ${flyway:defaultSchema}.backfill (subscription_id, created_at);
CREATE UNIQUE INDEX backfill_initial ON ${flyway:defaultSchema}.backfill (subscription_id) WHERE origin = 'initial';
