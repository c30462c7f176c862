-- A key of each backfill's own for its read events' ids: an id was the backfill's id and a SHA-256
-- of the row's table and key, which anyone reading an id (a log line, /status) could match to a
-- guessed key (an e-mail address, a customer number). Now an HMAC under this key, random, written
-- by walhook with the backfill, never shown. A backfill without one (from before, or inserted by
-- an older walhook during a rolling upgrade) keeps SHA-256 ids, across its restarts.
ALTER TABLE ${flyway:defaultSchema}.backfill ADD COLUMN id_key bytea;
