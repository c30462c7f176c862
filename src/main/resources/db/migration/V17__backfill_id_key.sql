-- A key of each backfill's own for its read events' ids: an id was the backfill's id and a SHA-256
-- of the row's table and key, which anyone reading an id (a log line, /status) could match to a
-- guessed key (an e-mail address, a customer number). Now an HMAC under this key, random and never
-- shown. A backfill from before has none: its ids stay as they were, across its restarts.
ALTER TABLE ${flyway:defaultSchema}.backfill ADD COLUMN id_key bytea;
ALTER TABLE ${flyway:defaultSchema}.backfill
    ALTER COLUMN id_key SET DEFAULT (uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
