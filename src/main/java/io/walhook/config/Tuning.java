package io.walhook.config;

import java.time.Duration;

/**
 * walhook's settings beyond the source and subscriptions, read from their text
 * ({@link WalhookConfig}) and checked: each bad value is a {@link ConfigException} naming its
 * environment variable. {@link StartupCheck} reads them before anything connects.
 */
public record Tuning(boolean allowPrivateDestinations, Duration standbyPollInterval, Duration shutdownGracePeriod,
        Duration requestTimeout, Duration maxBackoff, Duration retryWindow, int concurrency,
        Duration parkedRetryInterval, Duration statusInterval, Duration checkpointInterval, long streamMemoryBytes,
        int handoffCapacity, long handoffBytes, Duration reconnectMaxBackoff, Duration backfillChunkTarget,
        Duration backfillStatementTimeout) {

    private static final Duration HOUR = Duration.ofHours(1);
    private static final Duration DAY = Duration.ofDays(1);

    public static Tuning of(WalhookConfig config) {
        WalhookConfig.Delivery d = config.delivery();
        WalhookConfig.Source s = config.source();
        return new Tuning(
                ConfigValues.flag("WALHOOK_ALLOW_PRIVATE_DESTINATIONS", config.allowPrivateDestinations()),
                ConfigValues.duration("WALHOOK_STANDBY_POLL_INTERVAL", config.standbyPollInterval(), false, HOUR, "1h"),
                ConfigValues.duration("WALHOOK_SHUTDOWN_GRACE_PERIOD", config.shutdownGracePeriod(), true, HOUR, "1h"),
                ConfigValues.duration("WALHOOK_DELIVERY_REQUEST_TIMEOUT", d.requestTimeout(), false, HOUR, "1h"),
                ConfigValues.duration("WALHOOK_DELIVERY_MAX_BACKOFF", d.maxBackoff(), false, DAY, "24h"),
                ConfigValues.duration("WALHOOK_DELIVERY_RETRY_WINDOW", d.retryWindow(), false, Duration.ofDays(7), "7d"),
                (int) ConfigValues.number("WALHOOK_DELIVERY_CONCURRENCY", d.concurrency(), 1, 64),
                ConfigValues.duration("WALHOOK_DELIVERY_PARKED_RETRY_INTERVAL", d.parkedRetryInterval(), false, DAY, "24h"),
                ConfigValues.duration("WALHOOK_SOURCE_STATUS_INTERVAL", s.statusInterval(), false, HOUR, "1h"),
                ConfigValues.duration("WALHOOK_SOURCE_CHECKPOINT_INTERVAL", s.checkpointInterval(), false, HOUR, "1h"),
                ConfigValues.number("WALHOOK_SOURCE_STREAM_MEMORY_BYTES", s.streamMemoryBytes(), 0, Long.MAX_VALUE),
                (int) ConfigValues.number("WALHOOK_SOURCE_HANDOFF_CAPACITY", s.handoffCapacity(), 1, 10_000_000),
                ConfigValues.number("WALHOOK_SOURCE_HANDOFF_BYTES", s.handoffBytes(), 1L << 20, Long.MAX_VALUE),
                ConfigValues.duration("WALHOOK_SOURCE_RECONNECT_MAX_BACKOFF", s.reconnectMaxBackoff(), false, HOUR, "1h"),
                ConfigValues.duration("WALHOOK_BACKFILL_CHUNK_TARGET", config.backfill().chunkTarget(), false, HOUR, "1h"),
                ConfigValues.duration("WALHOOK_BACKFILL_STATEMENT_TIMEOUT", config.backfill().statementTimeout(), false,
                        DAY, "24h"));
    }
}
