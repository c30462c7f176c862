package io.walhook.config;

import java.util.Optional;

import io.smallrye.config.ConfigMapping;
import io.smallrye.config.WithDefault;

/**
 * Everything an operator configures. Each property {@code walhook.a-b} is also the environment
 * variable {@code WALHOOK_A_B}; the README's reference table lists them all.
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

    /** Bearer token required by the management API; with none set, write endpoints answer 401. */
    Optional<String> apiToken();

    /** Allow webhook URLs that resolve to loopback or private addresses. */
    @WithDefault("false")
    boolean allowPrivateDestinations();

    /** {@code amqp://user:password@host:port} (or {@code amqps://}) of the AMQP 1.0 broker. */
    Optional<String> amqpUrl();

    interface Source {
        /** {@code postgresql://user:password@host:port/database?sslmode=...}; required. */
        Optional<String> url();

        /** Overrides the URL's user. */
        Optional<String> user();

        /** Overrides the URL's password. */
        Optional<String> password();

        /** How often walhook reports its position to the server; keep it below wal_sender_timeout / 2. */
        @WithDefault("10s")
        java.time.Duration statusInterval();

        /** How long walhook may wait between acknowledging delivered positions (and persisting them). */
        @WithDefault("1s")
        java.time.Duration checkpointInterval();

        /** Bytes of unfinished streamed transactions kept in memory; beyond, they are spilled to disk. */
        @WithDefault("67108864")
        long streamMemoryBytes();

        /** Where streamed transactions are spilled; the JVM's temporary directory when unset. */
        Optional<String> spillDirectory();

        /** Events handed from the reader to delivery before the reader waits (back-pressure). */
        @WithDefault("10000")
        int handoffCapacity();

        /** The longest wait between reconnection attempts (backoff doubles from 1 s). */
        @WithDefault("30s")
        java.time.Duration reconnectMaxBackoff();
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
