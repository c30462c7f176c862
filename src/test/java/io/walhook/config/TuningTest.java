package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import io.smallrye.config.PropertiesConfigSource;
import io.smallrye.config.SmallRyeConfigBuilder;

/** walhook's own settings: their defaults, and a bad value named by its variable, in one line. */
class TuningTest {

    /** walhook's configuration as the application maps it, from these properties alone (and the defaults). */
    static WalhookConfig mapping(Map<String, String> properties) {
        return new SmallRyeConfigBuilder().withMapping(WalhookConfig.class)
                .withSources(new PropertiesConfigSource(properties, "test", 500)).build()
                .getConfigMapping(WalhookConfig.class);
    }

    private static Tuning tuning(Map<String, String> properties) {
        return Tuning.of(mapping(properties));
    }

    @Test
    void defaultsAreTheDocumentedOnes() {
        Tuning t = tuning(Map.of());
        assertThat(t).isEqualTo(new Tuning(false, Duration.ofSeconds(2), Duration.ofSeconds(20), Duration.ofSeconds(30),
                Duration.ofSeconds(60), Duration.ofMinutes(5), 4, Duration.ofMinutes(5), Duration.ofSeconds(10),
                Duration.ofSeconds(1), 67_108_864, 10_000, 33_554_432L, Duration.ofSeconds(30), Duration.ofMillis(500),
                Duration.ofSeconds(30)));
    }

    @Test
    void readsEachValue() {
        Tuning t = tuning(Map.of("walhook.allow-private-destinations", "TRUE", "walhook.shutdown-grace-period", "0s",
                "walhook.delivery.request-timeout", "500ms", "walhook.delivery.concurrency", " 8 ",
                "walhook.delivery.retry-window", "PT1H", "walhook.source.stream-memory-bytes", "0",
                "walhook.source.handoff-capacity", "1"));
        assertThat(t.allowPrivateDestinations()).isTrue();
        assertThat(t.shutdownGracePeriod()).as("no grace: stop at once").isZero();
        assertThat(t.requestTimeout()).isEqualTo(Duration.ofMillis(500));
        assertThat(t.concurrency()).isEqualTo(8);
        assertThat(t.retryWindow()).isEqualTo(Duration.ofHours(1));
        assertThat(t.streamMemoryBytes()).isZero();
        assertThat(t.handoffCapacity()).isEqualTo(1);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "walhook.allow-private-destinations=enabled | WALHOOK_ALLOW_PRIVATE_DESTINATIONS is 'enabled'; it must be true or false",
        "walhook.standby-poll-interval=0s           | WALHOOK_STANDBY_POLL_INTERVAL is 0s; it must be longer than zero",
        "walhook.shutdown-grace-period=-5s          | WALHOOK_SHUTDOWN_GRACE_PERIOD is -5s; it must be zero or more",
        "walhook.delivery.request-timeout=5x        | WALHOOK_DELIVERY_REQUEST_TIMEOUT is '5x', not a duration",
        "walhook.delivery.request-timeout=0         | WALHOOK_DELIVERY_REQUEST_TIMEOUT is 0; it must be longer than zero",
        "walhook.delivery.max-backoff=2d            | WALHOOK_DELIVERY_MAX_BACKOFF is 2d; it must be at most 24h",
        "walhook.delivery.retry-window=8d           | WALHOOK_DELIVERY_RETRY_WINDOW is 8d; it must be at most 7d",
        "walhook.delivery.concurrency=0             | WALHOOK_DELIVERY_CONCURRENCY is 0; it must be between 1 and 64",
        "walhook.delivery.concurrency=four          | WALHOOK_DELIVERY_CONCURRENCY is 'four', not a whole number",
        "walhook.delivery.parked-retry-interval=1 week | WALHOOK_DELIVERY_PARKED_RETRY_INTERVAL is '1 week', not a duration",
        "walhook.source.status-interval=2h          | WALHOOK_SOURCE_STATUS_INTERVAL is 2h; it must be at most 1h",
        "walhook.source.checkpoint-interval=soon    | WALHOOK_SOURCE_CHECKPOINT_INTERVAL is 'soon', not a duration",
        "walhook.source.stream-memory-bytes=64MB    | WALHOOK_SOURCE_STREAM_MEMORY_BYTES is '64MB', not a whole number",
        "walhook.source.handoff-capacity=0          | WALHOOK_SOURCE_HANDOFF_CAPACITY is 0; it must be between 1 and 10000000",
        "walhook.source.handoff-bytes=1000          | WALHOOK_SOURCE_HANDOFF_BYTES is 1000; it must be at least 1048576",
        "walhook.source.handoff-bytes=32MiB         | WALHOOK_SOURCE_HANDOFF_BYTES is '32MiB', not a whole number",
        "walhook.source.reconnect-max-backoff=-1s   | WALHOOK_SOURCE_RECONNECT_MAX_BACKOFF is -1s; it must be longer than zero",
    })
    void aBadValueNamesItsVariable(String assignment, String problem) {
        String[] kv = assignment.split("=", 2);
        assertThatThrownBy(() -> tuning(Map.of(kv[0], kv[1])))
                .isInstanceOf(ConfigException.class)
                .hasMessageStartingWith(problem)
                .satisfies(e -> assertThat(((ConfigException) e).variable()).isEqualTo(problem.split(" ")[0]));
    }
}
