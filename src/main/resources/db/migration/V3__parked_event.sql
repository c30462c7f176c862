-- Events a destination could not take within its retry window, kept so the slot can advance.
-- They are retried from here in id order (= commit order, so per-row order holds) and can be
-- listed and replayed through the API. body/content_type/headers are the request as written.
CREATE TABLE ${flyway:defaultSchema}.parked_event (
    id               bigserial   PRIMARY KEY,
    subscription     text        NOT NULL,
    event_id         text        NOT NULL,
    commit_lsn       pg_lsn      NOT NULL,
    content_type     text        NOT NULL,
    headers          jsonb       NOT NULL,
    body             bytea       NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0,
    last_error       text,
    parked_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (subscription, event_id)
);
CREATE INDEX parked_event_by_subscription ON ${flyway:defaultSchema}.parked_event (subscription, id);
