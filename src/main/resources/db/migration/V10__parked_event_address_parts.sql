-- The schema, table and operation of each queued event: the parts an AMQP address template
-- ({schema}, {table}, {op}) is filled with, so that a subscription whose destination was replaced
-- while its events waited sends them to the address of its new destination.
ALTER TABLE ${flyway:defaultSchema}.parked_event ADD COLUMN address_parts text[];
