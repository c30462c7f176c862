-- The runs that wrote to the durable queues, each with the position its stream resumed from: a
-- change the stream sent again in a run committed at or after that position. A lane reading its
-- queue remembers the rows a resend written after them can be older than, those that committed
-- at or after the earliest position of every run since the oldest row still queued; the run of
-- the moment alone was not enough once a resend written in an earlier run waited in a queue.
-- first_id: the first parked_event id the run could write (the newest id at its start, plus one);
-- resumed_from: the position as an unsigned number, 0 when unknown. Rows of runs no queued row
-- is older than are deleted at each start.
CREATE TABLE ${flyway:defaultSchema}.queue_run (
    first_id     bigint PRIMARY KEY,
    resumed_from bigint NOT NULL
);
