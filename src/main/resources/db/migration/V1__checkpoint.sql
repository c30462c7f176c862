-- walhook's own state lives in the schema named by WALHOOK_STATE_SCHEMA (Flyway's default schema).
-- The acknowledged position of each replication slot: the end LSN of the last fully delivered
-- transaction, written before it is reported to the server as the flush LSN.
CREATE TABLE ${flyway:defaultSchema}.checkpoint (
    slot_name    text        PRIMARY KEY,
    end_lsn      pg_lsn      NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
