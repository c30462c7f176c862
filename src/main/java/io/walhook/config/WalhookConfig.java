package io.walhook.config;

import java.time.Duration;
import java.util.Map;
import java.util.Optional;

import io.smallrye.config.ConfigMapping;
import io.smallrye.config.WithConverter;
import io.smallrye.config.WithDefault;

/**
 * Everything an operator configures. Each property {@code walhook.a-b} is also the environment
 * variable {@code WALHOOK_A_B}; the README's reference table lists them all. Durations, numbers
 * and flags are typed, each read by one of the strict {@link Converters}, with its bounds: a bad
 * value stops start-up with one line naming its variable ({@link ConfigReport}). Subscriptions
 * are mapped as text and read by {@code SubscriptionConfigReader}, which names the variable itself
 * (their names are the operator's: {@code WALHOOK_SUBSCRIPTIONS_<NAME>_URL}).
 */
@ConfigMapping(prefix = "walhook")
public interface WalhookConfig {

    /** The source database: where changes come from and where walhook keeps its own state. */
    Source source();

    /** Replication slot name; created (plugin pgoutput) when missing. */
    @WithDefault("walhook")
    String slot();

    /** Publication walhook streams; created when missing. */
    Publication publication();

    /** Schema holding walhook's own tables (checkpoint, subscriptions, parked events); never routed. */
    @WithDefault("walhook")
    String stateSchema();

    /**
     * Bearer token of the management API ({@code /subscriptions}, {@code /status}), reads and
     * writes; with no token set the API answers 401 saying how to set one.
     */
    Optional<String> apiToken();

    /**
     * A second bearer token that allows the management API's GET requests only (a write with it
     * answers 403): for dashboards and monitors that must not change subscriptions.
     */
    Optional<String> apiReadToken();

    /** Allow webhook URLs that resolve to loopback or private addresses. */
    @WithDefault("false")
    @WithConverter(Converters.Flag.class)
    boolean allowPrivateDestinations();

    /** {@code amqp://user:password@host:port} (or {@code amqps://}) of the AMQP 1.0 broker. */
    Optional<String> amqpUrl();

    /** How often a standby tries the active instance's lock (one active walhook per slot). */
    @WithDefault("2s")
    @WithConverter(Converters.UpToAnHour.class)
    Duration standbyPollInterval();

    /** On SIGTERM, how long in-flight deliveries may take before the stream is acknowledged and closed. */
    @WithDefault("20s")
    @WithConverter(Converters.ZeroToAnHour.class)
    Duration shutdownGracePeriod();

    /**
     * Subscriptions defined by configuration, by name: {@code WALHOOK_SUBSCRIPTIONS_<NAME>_URL} is
     * {@code walhook.subscriptions.<name>.url}. Read-only in the API. Values are validated by
     * {@code io.walhook.routing.SubscriptionConfigReader}, which names the variable at fault.
     */
    Map<String, SubscriptionConfig> subscriptions();

    /** One configured subscription; every field is text so that a bad value is reported with its variable. */
    interface SubscriptionConfig {
        /** Comma list of {@code schema.table} patterns with {@code *} wildcards; all tables when unset. */
        Optional<String> tables();

        /** Comma list of insert, update, delete, truncate, message; all when unset. */
        Optional<String> operations();

        /** CEL expression over op, schema, table, new, old, key. */
        Optional<String> filter();

        /** Webhook destination (http or https). */
        Optional<String> url();

        /** Standard Webhooks secret, {@code whsec_<base64>}; enables signing. */
        Optional<String> secret();

        /** AMQP 1.0 address instead of a URL; {@code {schema}}, {@code {table}}, {@code {op}} are substituted. */
        Optional<String> amqpAddress();

        /** json (default), cloudevents or cloudevents-binary. */
        Optional<String> format();

        /** More than 1: a webhook body is a JSON array of up to that many events. */
        Optional<String> batchMaxEvents();

        /** How long a batch may wait to fill, in milliseconds. */
        Optional<String> batchMaxWaitMs();

        /** Comma list of the only columns to send (key columns are always kept in key). */
        Optional<String> includeColumns();

        /** Comma list of columns never to send. */
        Optional<String> excludeColumns();

        /** Attempts (1 to 1000) after which a failing request is parked even before the retry window ends. */
        Optional<String> retryMaxAttempts();

        /** This subscription's longest wait between two attempts (a duration); the global one when unset. */
        Optional<String> retryMaxBackoff();

        /** This subscription's retry window (a duration); the global one when unset. */
        Optional<String> retryWindow();

        /** {@code initial}: backfill the subscription's tables once, at its first start (docs/backfills.md). */
        Optional<String> backfill();

        /** Requests (AMQP: messages) under way at once for this subscription; the global concurrency when unset. */
        Optional<String> maxInFlight();

        /** At most this many requests started per period: {@code 50/s}, {@code 600/min}; no limit when unset. */
        Optional<String> rateLimit();
    }

    /** How backfills read tables. */
    Backfills backfill();

    interface Backfills {
        /** How long one chunk's query should take: chunks shrink when slower, grow back (to chunk_size) when quicker. */
        @WithDefault("500ms")
        @WithConverter(Converters.UpToAnHour.class)
        Duration chunkTarget();

        /** The longest one chunk's query may run; past it, the chunk is read again four times smaller. */
        @WithDefault("30s")
        @WithConverter(Converters.UpToADay.class)
        Duration statementTimeout();
    }

    /** How webhooks are delivered. */
    Delivery delivery();

    interface Delivery {
        /** How long one HTTP request may take. */
        @WithDefault("30s")
        @WithConverter(Converters.UpToAnHour.class)
        Duration requestTimeout();

        /** The longest wait between two attempts (backoff doubles from 200 ms, with full jitter). */
        @WithDefault("60s")
        @WithConverter(Converters.UpToADay.class)
        Duration maxBackoff();

        /**
         * How long a failing request is retried from memory before the subscription's events go to
         * its durable queue (in order, acknowledged) and are delivered from there.
         */
        @WithDefault("5m")
        @WithConverter(Converters.UpToAWeek.class)
        Duration retryWindow();

        /** Requests under way at once per subscription (AMQP: up to 100 messages); a row's changes are never under way together. */
        @WithDefault("4")
        @WithConverter(Converters.Concurrency.class)
        int concurrency();

        /**
         * The longest wait between attempts while every attempt at a destination fails (one request
         * at a time probes it): a destination back after a long outage gets its backlog within it.
         */
        @WithDefault("5s")
        @WithConverter(Converters.UpToADay.class)
        Duration parkedRetryInterval();

        /**
         * Bytes of undelivered events all subscriptions hold in memory together before routing
         * waits (back-pressure); each subscription also has its own budget of 4,000 events, and
         * events read back from durable queues take at most a quarter of this again.
         */
        @WithDefault("67108864")
        @WithConverter(Converters.AtLeastAMebibyte.class)
        long memoryBytes();
    }

    interface Source {
        /** {@code postgresql://user:password@host:port/database?sslmode=...}; required. */
        Optional<String> url();

        /** Overrides the URL's user. */
        Optional<String> user();

        /** Overrides the URL's password. */
        Optional<String> password();

        /** How often walhook reports its position to the server; keep it below wal_sender_timeout / 2. */
        @WithDefault("10s")
        @WithConverter(Converters.UpToAnHour.class)
        Duration statusInterval();

        /** How long walhook may wait between acknowledging delivered positions (and persisting them). */
        @WithDefault("1s")
        @WithConverter(Converters.UpToAnHour.class)
        Duration checkpointInterval();

        /** Bytes of unfinished streamed transactions kept in memory; beyond, they are spilled to disk. */
        @WithDefault("67108864")
        @WithConverter(Converters.Bytes.class)
        long streamMemoryBytes();

        /** Where streamed transactions are spilled; the JVM's temporary directory when unset. */
        Optional<String> spillDirectory();

        /** Events handed from the reader to delivery before the reader waits (back-pressure). */
        @WithDefault("10000")
        @WithConverter(Converters.HandoffEvents.class)
        int handoffCapacity();

        /** Bytes of row values handed from the reader to delivery before the reader waits (back-pressure). */
        @WithDefault("33554432")
        @WithConverter(Converters.AtLeastAMebibyte.class)
        long handoffBytes();

        /** The longest wait between reconnection attempts (backoff doubles from 1 s). */
        @WithDefault("30s")
        @WithConverter(Converters.UpToAnHour.class)
        Duration reconnectMaxBackoff();
    }

    interface Publication {
        /** Publication name; created when missing. Written {@code walhook.publication}. */
        @io.smallrye.config.WithParentName
        @WithDefault("walhook")
        String name();

        /** Tables of a publication walhook creates: {@code *} for all tables, else {@code schema.table,...}. */
        @WithDefault("*")
        String tables();
    }
}
