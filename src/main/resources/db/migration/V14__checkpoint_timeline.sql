-- The server history a checkpoint was read on: the cluster's system identifier and the timeline
-- (both from IDENTIFY_SYSTEM). A server on another timeline (a standby promoted since) shares the
-- checkpoint's history only up to the point where its own left it; past that point the position
-- is of a history the server never had. NULL in rows saved before walhook kept them: unknown.
ALTER TABLE ${flyway:defaultSchema}.checkpoint
    ADD COLUMN system_id text,
    ADD COLUMN timeline  bigint;
