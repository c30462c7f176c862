-- The subscriptions a 410 Gone disabled, kept across restarts and take-overs until a replay or
-- another endpoint enables them again: held in memory only, a restart delivered to the endpoint
-- that had said it was gone for good. endpoint: a SHA-256 of the destination that answered 410
-- (its URL, or AMQP address template; not the URL itself, which may hold a credential), so that a
-- subscription replaced by another endpoint is not disabled for the old one's answer.
CREATE TABLE ${flyway:defaultSchema}.gone_endpoint (
    subscription_id text        PRIMARY KEY,
    endpoint        text        NOT NULL,
    disabled_at     timestamptz NOT NULL
);
