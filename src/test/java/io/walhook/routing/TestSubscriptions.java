package io.walhook.routing;

import java.net.URI;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import io.walhook.change.Operation;

import io.walhook.config.WalhookConfig;

/** Configured subscriptions for tests, without a Quarkus application. */
public final class TestSubscriptions {

    private TestSubscriptions() {
    }

    /** A webhook subscription to a port nothing listens on, for routing tests. */
    public static Subscription routed(String name, String tables, Set<Operation> operations, String filter) {
        return new Subscription(name, List.of(TablePattern.parse(tables)), operations,
                Optional.ofNullable(filter).map(CelFilter::compile),
                new Destination.Webhook(URI.create("http://127.0.0.1:9/" + name), List.of(), Map.of()),
                EventFormat.JSON, 1, 0, Projection.ALL, true);
    }

    /** A configured subscription from field name to value, as the environment gives them. */
    public static WalhookConfig.SubscriptionConfig config(Map<String, String> v) {
        return new WalhookConfig.SubscriptionConfig() {
            public Optional<String> tables() { return Optional.ofNullable(v.get("TABLES")); }
            public Optional<String> operations() { return Optional.ofNullable(v.get("OPERATIONS")); }
            public Optional<String> filter() { return Optional.ofNullable(v.get("FILTER")); }
            public Optional<String> url() { return Optional.ofNullable(v.get("URL")); }
            public Optional<String> secret() { return Optional.ofNullable(v.get("SECRET")); }
            public Optional<String> amqpAddress() { return Optional.ofNullable(v.get("AMQP_ADDRESS")); }
            public Optional<String> format() { return Optional.ofNullable(v.get("FORMAT")); }
            public Optional<String> batchMaxEvents() { return Optional.ofNullable(v.get("BATCH_MAX_EVENTS")); }
            public Optional<String> batchMaxWaitMs() { return Optional.ofNullable(v.get("BATCH_MAX_WAIT_MS")); }
            public Optional<String> includeColumns() { return Optional.ofNullable(v.get("INCLUDE_COLUMNS")); }
            public Optional<String> excludeColumns() { return Optional.ofNullable(v.get("EXCLUDE_COLUMNS")); }
            public Optional<String> retryMaxAttempts() { return Optional.ofNullable(v.get("RETRY_MAX_ATTEMPTS")); }
            public Optional<String> retryMaxBackoff() { return Optional.ofNullable(v.get("RETRY_MAX_BACKOFF")); }
            public Optional<String> retryWindow() { return Optional.ofNullable(v.get("RETRY_WINDOW")); }
            public Optional<String> backfill() { return Optional.ofNullable(v.get("BACKFILL")); }
            public Optional<String> maxInFlight() { return Optional.ofNullable(v.get("MAX_IN_FLIGHT")); }
            public Optional<String> rateLimit() { return Optional.ofNullable(v.get("RATE_LIMIT")); }
        };
    }
}
