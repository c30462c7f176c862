-- Parked events become each subscription's durable queue, delivered from continuously and in
-- order, and they belong to the subscription's id (a rename keeps them, a subscription created
-- later under an old name starts empty). Configured subscriptions' ids are 'config:<name>'.
-- ordering: what the event must stay in order with ([scope, table, key, other key]; NULL for rows
-- parked before: ordered against everything). row_key: the row's key as JSON, for the API's filter.
ALTER TABLE ${flyway:defaultSchema}.parked_event ADD COLUMN subscription_id text;
UPDATE ${flyway:defaultSchema}.parked_event p SET subscription_id = COALESCE(
    (SELECT s.id::text FROM ${flyway:defaultSchema}.subscription s WHERE s.name = p.subscription),
    'config:' || p.subscription);
ALTER TABLE ${flyway:defaultSchema}.parked_event ALTER COLUMN subscription_id SET NOT NULL;
ALTER TABLE ${flyway:defaultSchema}.parked_event ADD COLUMN ordering bigint[];
ALTER TABLE ${flyway:defaultSchema}.parked_event ADD COLUMN row_key jsonb;
ALTER TABLE ${flyway:defaultSchema}.parked_event ADD COLUMN commit_time timestamptz;
ALTER TABLE ${flyway:defaultSchema}.parked_event DROP CONSTRAINT parked_event_subscription_event_id_key;
ALTER TABLE ${flyway:defaultSchema}.parked_event ADD CONSTRAINT parked_event_subscription_id_event_id_key
    UNIQUE (subscription_id, event_id);
DROP INDEX ${flyway:defaultSchema}.parked_event_by_lane;
DROP INDEX ${flyway:defaultSchema}.parked_event_by_subscription;
ALTER TABLE ${flyway:defaultSchema}.parked_event DROP COLUMN lane;
CREATE INDEX parked_event_queue ON ${flyway:defaultSchema}.parked_event (subscription_id, id);
