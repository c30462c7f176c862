-- AMQP subscriptions resolve an address per event ({schema}, {table}, {op}): a parked AMQP
-- request keeps the address it resolved to. Null for webhooks.
ALTER TABLE ${flyway:defaultSchema}.parked_event ADD COLUMN address text;
