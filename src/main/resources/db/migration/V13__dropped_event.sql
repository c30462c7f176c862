-- Events dropped from a durable queue through the API, kept while the slot may send their changes
-- again (a crash, a restart or a take-over before its acknowledged position passed them): read at
-- activation, such a change is not queued nor sent to that subscription a second time. Rows every
-- slot's acknowledged position has passed are no longer needed and are deleted.
CREATE TABLE ${flyway:defaultSchema}.dropped_event (
    subscription_id  text    NOT NULL,
    event_id         text    NOT NULL,
    commit_lsn       pg_lsn  NOT NULL,
    PRIMARY KEY (subscription_id, event_id)
);
