-- Subscriptions created through the management API. The body is the API's subscription object
-- (secrets included, never returned by the API); walhook validates it before writing it and again
-- when it loads it. Every write bumps updated_at, so running instances see the change.
CREATE TABLE ${flyway:defaultSchema}.subscription (
    id          uuid        PRIMARY KEY,
    name        text        NOT NULL UNIQUE,
    body        jsonb       NOT NULL,
    paused      boolean     NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
