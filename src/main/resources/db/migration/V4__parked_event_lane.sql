-- Delivery runs several lanes per subscription (a row's changes always take the same lane);
-- each parks and retries its own requests, so per-row order holds.
ALTER TABLE ${flyway:defaultSchema}.parked_event ADD COLUMN lane integer NOT NULL DEFAULT 0;
CREATE INDEX parked_event_by_lane ON ${flyway:defaultSchema}.parked_event (subscription, lane, id);
