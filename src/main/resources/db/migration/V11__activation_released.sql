-- Whether the active instance let the lock go cleanly: it stopped, having delivered or given up all
-- it sends. A new holder then starts at once; otherwise (a crash, a lost lock session) it first waits
-- out the lease for which the holder before it may still be sending.
ALTER TABLE ${flyway:defaultSchema}.activation ADD COLUMN released boolean NOT NULL DEFAULT false;
