-- Each time an instance becomes the active one of a slot (takes its lock), it counts one more
-- activation here, in the lock's session. An instance whose lock session ended takes the lock again
-- only if no other instance was active in between (the count is still its own); otherwise it exits,
-- as the other may have queued and delivered events it knows nothing of.
CREATE TABLE ${flyway:defaultSchema}.activation (
    slot_name     text        PRIMARY KEY,
    activations   bigint      NOT NULL,
    activated_at  timestamptz NOT NULL DEFAULT now()
);
