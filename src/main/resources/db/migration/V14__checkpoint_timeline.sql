-- The server history a checkpoint was read on: the cluster's system identifier and the timeline
-- (both from IDENTIFY_SYSTEM). A server on another timeline (a standby promoted since) shares the
-- checkpoint's history only up to the point where its own left it; past that point the position
-- is of a history the server never had. NULL in rows saved before walhook kept them: unknown.
-- When the checkpoint is replaced for that reason, the durable queues' rows up to then
-- (earlier_history_up_to, a parked_event id) are of the earlier history: none is taken for a
-- newer change of its row than the changes the stream sends from then on.
ALTER TABLE ${flyway:defaultSchema}.checkpoint
    ADD COLUMN system_id             text,
    ADD COLUMN timeline              bigint,
    ADD COLUMN earlier_history_up_to bigint NOT NULL DEFAULT 0;
