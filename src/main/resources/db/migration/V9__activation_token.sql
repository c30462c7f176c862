-- The key of the token lock the active instance's lock session holds beside the slot's lock. The
-- next instance to take the lock waits until that key is free too (a backend ending releases its
-- locks one part of the lock table at a time) before it looks at the durable queues.
ALTER TABLE ${flyway:defaultSchema}.activation ADD COLUMN token bigint;
