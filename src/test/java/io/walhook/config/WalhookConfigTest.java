package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import io.smallrye.config.ConfigMapping;
import io.smallrye.config.ConfigValidationException;
import io.smallrye.config.PropertiesConfigSource;
import io.smallrye.config.SmallRyeConfigBuilder;
import io.smallrye.config.WithDefault;

/**
 * walhook's own settings as SmallRye maps them: their typed defaults, each value read strictly,
 * and a bad value reported as the line an operator reads, naming its variable.
 */
class WalhookConfigTest {

    /** walhook's configuration as the application maps it, from these properties alone (and the defaults). */
    static WalhookConfig mapping(Map<String, String> properties) {
        return new SmallRyeConfigBuilder().withMapping(WalhookConfig.class)
                .withSources(new PropertiesConfigSource(properties, "test", 500)).build()
                .getConfigMapping(WalhookConfig.class);
    }

    /** What start-up would log for these properties: one line per bad value. */
    private static List<String> report(Map<String, String> properties) {
        try {
            mapping(properties);
        } catch (ConfigValidationException e) {
            return ConfigReport.lines(e);
        }
        throw new AssertionError("mapped without a problem: " + properties);
    }

    @Test
    void defaultsAreTheDocumentedOnes() {
        WalhookConfig c = mapping(Map.of());
        assertThat(c.allowPrivateDestinations()).isFalse();
        assertThat(c.standbyPollInterval()).isEqualTo(Duration.ofSeconds(2));
        assertThat(c.shutdownGracePeriod()).isEqualTo(Duration.ofSeconds(20));
        assertThat(c.delivery().requestTimeout()).isEqualTo(Duration.ofSeconds(30));
        assertThat(c.delivery().maxBackoff()).isEqualTo(Duration.ofSeconds(60));
        assertThat(c.delivery().retryWindow()).isEqualTo(Duration.ofMinutes(5));
        assertThat(c.delivery().parkedRetryInterval()).as("a destination back after an outage is found within seconds")
                .isEqualTo(Duration.ofSeconds(5));
        assertThat(c.delivery().concurrency()).isEqualTo(4);
        assertThat(c.source().statusInterval()).isEqualTo(Duration.ofSeconds(10));
        assertThat(c.source().checkpointInterval()).isEqualTo(Duration.ofSeconds(1));
        assertThat(c.source().streamMemoryBytes()).isEqualTo(67_108_864L);
        assertThat(c.source().handoffCapacity()).isEqualTo(10_000);
        assertThat(c.source().handoffBytes()).isEqualTo(33_554_432L);
        assertThat(c.delivery().memoryBytes()).isEqualTo(67_108_864L);
        assertThat(c.source().reconnectMaxBackoff()).isEqualTo(Duration.ofSeconds(30));
        assertThat(c.backfill().chunkTarget()).isEqualTo(Duration.ofMillis(500));
        assertThat(c.backfill().statementTimeout()).isEqualTo(Duration.ofSeconds(30));
    }

    @Test
    void readsEachValue() {
        WalhookConfig c = mapping(Map.of("walhook.allow-private-destinations", "TRUE", "walhook.shutdown-grace-period", "0s",
                "walhook.delivery.request-timeout", "500ms", "walhook.delivery.concurrency", " 8 ",
                "walhook.delivery.retry-window", "PT1H", "walhook.source.stream-memory-bytes", "0",
                "walhook.source.handoff-capacity", "1", "walhook.delivery.max-backoff", "24h"));
        assertThat(c.allowPrivateDestinations()).isTrue();
        assertThat(c.shutdownGracePeriod()).as("no grace: stop at once").isZero();
        assertThat(c.delivery().requestTimeout()).isEqualTo(Duration.ofMillis(500));
        assertThat(c.delivery().concurrency()).isEqualTo(8);
        assertThat(c.delivery().retryWindow()).isEqualTo(Duration.ofHours(1));
        assertThat(c.delivery().maxBackoff()).as("the bound itself is allowed").isEqualTo(Duration.ofDays(1));
        assertThat(c.source().streamMemoryBytes()).isZero();
        assertThat(c.source().handoffCapacity()).isEqualTo(1);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "walhook.allow-private-destinations=enabled | WALHOOK_ALLOW_PRIVATE_DESTINATIONS is 'enabled'; it must be true or false",
        "walhook.allow-private-destinations=yes     | WALHOOK_ALLOW_PRIVATE_DESTINATIONS is 'yes'; it must be true or false",
        "walhook.standby-poll-interval=0s           | WALHOOK_STANDBY_POLL_INTERVAL is 0s; it must be longer than zero",
        "walhook.shutdown-grace-period=-5s          | WALHOOK_SHUTDOWN_GRACE_PERIOD is -5s; it must be zero or more",
        "walhook.shutdown-grace-period=2h           | WALHOOK_SHUTDOWN_GRACE_PERIOD is 2h; it must be at most 1h",
        "walhook.delivery.request-timeout=5x        | WALHOOK_DELIVERY_REQUEST_TIMEOUT is '5x', not a duration",
        "walhook.delivery.request-timeout=0         | WALHOOK_DELIVERY_REQUEST_TIMEOUT is 0; it must be longer than zero",
        "walhook.delivery.max-backoff=2d            | WALHOOK_DELIVERY_MAX_BACKOFF is 2d; it must be at most 24h",
        "walhook.delivery.retry-window=8d           | WALHOOK_DELIVERY_RETRY_WINDOW is 8d; it must be at most 7d",
        "walhook.delivery.concurrency=0             | WALHOOK_DELIVERY_CONCURRENCY is 0; it must be between 1 and 64",
        "walhook.delivery.concurrency=65            | WALHOOK_DELIVERY_CONCURRENCY is 65; it must be between 1 and 64",
        "walhook.delivery.concurrency=four          | WALHOOK_DELIVERY_CONCURRENCY is 'four', not a whole number",
        "walhook.delivery.parked-retry-interval=1 week | WALHOOK_DELIVERY_PARKED_RETRY_INTERVAL is '1 week', not a duration",
        "walhook.source.status-interval=2h          | WALHOOK_SOURCE_STATUS_INTERVAL is 2h; it must be at most 1h",
        "walhook.source.checkpoint-interval=soon    | WALHOOK_SOURCE_CHECKPOINT_INTERVAL is 'soon', not a duration",
        "walhook.source.stream-memory-bytes=64MB    | WALHOOK_SOURCE_STREAM_MEMORY_BYTES is '64MB', not a whole number",
        "walhook.source.handoff-capacity=0          | WALHOOK_SOURCE_HANDOFF_CAPACITY is 0; it must be between 1 and 10000000",
        "walhook.source.handoff-bytes=1000          | WALHOOK_SOURCE_HANDOFF_BYTES is 1000; it must be at least 1048576",
        "walhook.source.handoff-bytes=32MiB         | WALHOOK_SOURCE_HANDOFF_BYTES is '32MiB', not a whole number",
        "walhook.delivery.memory-bytes=65535        | WALHOOK_DELIVERY_MEMORY_BYTES is 65535; it must be at least 1048576",
        "walhook.source.reconnect-max-backoff=-1s   | WALHOOK_SOURCE_RECONNECT_MAX_BACKOFF is -1s; it must be longer than zero",
        "walhook.backfill.chunk-target=2h           | WALHOOK_BACKFILL_CHUNK_TARGET is 2h; it must be at most 1h",
        "walhook.backfill.statement-timeout=never   | WALHOOK_BACKFILL_STATEMENT_TIMEOUT is 'never', not a duration",
        "walhook.delivery.max-backoff=60000         | WALHOOK_DELIVERY_MAX_BACKOFF is 60000 without a unit; write 60000ms or 60000s",
        "walhook.delivery.max-backoff=+60000        | WALHOOK_DELIVERY_MAX_BACKOFF is +60000 without a unit",
        "walhook.backfill.statement-timeout=PT0.0005S | WALHOOK_BACKFILL_STATEMENT_TIMEOUT is PT0.0005S; it must be at least 1ms",
        "walhook.standby-poll-interval=PT0.0001S    | WALHOOK_STANDBY_POLL_INTERVAL is PT0.0001S; it must be at least 1ms",
    })
    void aBadValueIsOneLineNamingItsVariable(String assignment, String problem) {
        String[] kv = assignment.split("=", 2);
        assertThat(report(Map.of(kv[0], kv[1]))).singleElement().asString().startsWith(problem).doesNotContain("\n")
                .doesNotContain("SRCFG").doesNotContain("Exception");
    }

    @Test
    void everyBadValueHasItsOwnLine() {
        assertThat(report(Map.of("walhook.delivery.concurrency", "0", "walhook.source.status-interval", "later")))
                .containsExactlyInAnyOrder("WALHOOK_DELIVERY_CONCURRENCY is 0; it must be between 1 and 64",
                        "WALHOOK_SOURCE_STATUS_INTERVAL is 'later', not a duration; write e.g. 500ms, 30s, 5m, 1h or PT1M");
    }

    /** A mapping of Quarkus's kind, converted by SmallRye's own converters (quarkus.http.port is one). */
    @ConfigMapping(prefix = "quarkus.http")
    interface HttpLike {
        @WithDefault("8080")
        int port();
    }

    @Test
    void aValueSmallRyesOwnConvertersRefuseIsNamedToo() {
        assertThatThrownBy(() -> new SmallRyeConfigBuilder().withMapping(HttpLike.class)
                .withSources(new PropertiesConfigSource(Map.of("quarkus.http.port", "eighty"), "test", 500)).build())
                .isInstanceOfSatisfying(ConfigValidationException.class, e -> assertThat(ConfigReport.lines(e))
                        .singleElement().asString().startsWith("QUARKUS_HTTP_PORT is 'eighty': ")
                        .contains("eighty").doesNotContain("SRCFG"));
    }

    /** walhook's settings and what it derives from them are taken as written; Quarkus' own keep their expressions. */
    @Test
    void walhooksSettingsAreTakenAsWritten() {
        io.smallrye.config.SmallRyeConfig config = new SmallRyeConfigBuilder().addDefaultInterceptors()
                .addDiscoveredInterceptors().withSources(new DatasourceConfigSourceFactory())
                .withSources(new PropertiesConfigSource(Map.of(
                        "walhook.source.url", "postgresql://app@db.internal/app",
                        "walhook.source.password", "p$${HOME}w${no.such}d$$",
                        "walhook.api-token", "t${walhook.source.url}",
                        "walhook.slot", "orders",
                        "quarkus.http.host", "${walhook.slot}"), "test", 500))
                .build();
        assertThat(config.getValue("walhook.source.password", String.class)).isEqualTo("p$${HOME}w${no.such}d$$");
        assertThat(config.getValue("quarkus.datasource.password", String.class)).isEqualTo("p$${HOME}w${no.such}d$$");
        assertThat(config.getValue("quarkus.datasource.api.password", String.class)).isEqualTo("p$${HOME}w${no.such}d$$");
        assertThat(config.getValue("walhook.api-token", String.class)).isEqualTo("t${walhook.source.url}");
        assertThat(config.getValue("quarkus.http.host", String.class)).isEqualTo("orders");
    }

    @io.smallrye.config.ConfigMapping(prefix = "quarkus.datasource")
    interface DatasourceLike {
        String password();
    }

    /** A Quarkus setting (walhook's own are taken as written) whose ${...} names nothing: its text is not shown. */
    @Test
    void anExpressionThatNamesNoSettingIsNamedWithoutItsText() {
        assertThatThrownBy(() -> new SmallRyeConfigBuilder().addDefaultInterceptors().withMapping(DatasourceLike.class)
                .withSources(new PropertiesConfigSource(Map.of("quarkus.datasource.password", "hun${ter2}"), "test", 500))
                .build())
                .isInstanceOfSatisfying(ConfigValidationException.class, e -> assertThat(ConfigReport.lines(e))
                        .singleElement().asString()
                        .isEqualTo("QUARKUS_DATASOURCE_PASSWORD holds a ${...} that names no setting (write a $ in it as $$)"));
    }

    @Test
    void aProfiledPropertyIsNamedByItsVariable() {
        assertThat(ConfigReport.variable("%prod.walhook.delivery.request-timeout")).isEqualTo("WALHOOK_DELIVERY_REQUEST_TIMEOUT");
        assertThat(ConfigReport.variable("walhook.source.url")).isEqualTo("WALHOOK_SOURCE_URL");
    }

    @Test
    void aFailureThatIsNotConfigurationHasNoLines() {
        assertThat(ConfigReport.lines(new IllegalStateException("port in use"))).isEmpty();
    }

    @Test
    void theLinesAreWrittenAsQuarkusWouldLogThem() throws Exception {
        java.time.Instant at = java.time.Instant.parse("2026-12-02T06:16:40.123Z");
        assertThat(ConfigReport.logLine("walhook cannot start: WALHOOK_X is 0", false, at))
                .matches("\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d,123 ERROR \\[io.walhook.config.StartupCheck\\] \\(.+\\) "
                        + "walhook cannot start: WALHOOK_X is 0");
        com.fasterxml.jackson.databind.JsonNode record = new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(ConfigReport.logLine("walhook cannot start: WALHOOK_X is '\"'", true, at));
        assertThat(record.get("timestamp").asText()).isEqualTo("2026-12-02T06:16:40.123Z");
        assertThat(record.get("level").asText()).isEqualTo("ERROR");
        assertThat(record.get("loggerName").asText()).isEqualTo(StartupCheck.class.getName());
        assertThat(record.get("message").asText()).isEqualTo("walhook cannot start: WALHOOK_X is '\"'");
    }

    @Test
    void jsonLogsAreAskedForByTheVariableOrItsProperty() {
        java.util.Properties none = new java.util.Properties();
        assertThat(ConfigReport.jsonLogs(Map.of(), none)).isFalse();
        assertThat(ConfigReport.jsonLogs(Map.of("QUARKUS_LOG_CONSOLE_JSON_ENABLED", "TRUE"), none)).isTrue();
        java.util.Properties off = new java.util.Properties();
        off.setProperty("quarkus.log.console.json.enabled", "false");
        assertThat(ConfigReport.jsonLogs(Map.of("QUARKUS_LOG_CONSOLE_JSON_ENABLED", "true"), off))
                .as("a system property wins over the environment, as in Quarkus").isFalse();
    }

    /** A mapping with a credential SmallRye's own converter refuses. */
    @ConfigMapping(prefix = "quarkus.vault")
    interface WithSecret {
        @WithDefault("1")
        int tokenTtl();
    }

    @Test
    void aCredentialsValueIsNeverEchoed() {
        assertThatThrownBy(() -> new SmallRyeConfigBuilder().withMapping(WithSecret.class)
                .withSources(new PropertiesConfigSource(Map.of("quarkus.vault.token-ttl", "hunter2"), "test", 500)).build())
                .isInstanceOfSatisfying(ConfigValidationException.class, e -> assertThat(ConfigReport.lines(e))
                        .singleElement().asString().startsWith("QUARKUS_VAULT_TOKEN_TTL is (value hidden): ")
                        .doesNotContain("hunter2"));
    }

    @Test
    void smallRyesOtherProblemsNameTheVariableToo() {
        assertThat(ConfigReport.line("java.util.NoSuchElementException: SRCFG00014: The config property"
                + " quarkus.datasource.username is required but it could not be found in any config source"))
                .isEqualTo("QUARKUS_DATASOURCE_USERNAME is required but it could not be found in any config source");
        assertThat(ConfigReport.line("SRCFG00040: The config property quarkus.http.port is defined as the empty String (\"\")"
                + " which the following Converter considered to be null: io.smallrye.config.Converters$BuiltInConverter"))
                .startsWith("QUARKUS_HTTP_PORT is defined as the empty String");
        assertThat(ConfigReport.line("SRCFG00040: The config property quarkus.datasource.password is defined as \"x1\" here"))
                .isEqualTo("QUARKUS_DATASOURCE_PASSWORD is defined as (value hidden) here");
        assertThat(ConfigReport.line("SRCFG00050: walhook.bogus in System properties does not map to any root"))
                .as("a problem that names no config property keeps its words").isEqualTo("walhook.bogus in System properties does not map to any root");
    }

    @Test
    void jsonLogsAreOnForEveryWordQuarkusReadsAsTrue() {
        java.util.Properties none = new java.util.Properties();
        for (String on : List.of("true", "1", "YES", "y", "on")) {
            assertThat(ConfigReport.jsonLogs(Map.of("QUARKUS_LOG_CONSOLE_JSON_ENABLED", on), none)).as(on).isTrue();
        }
        assertThat(ConfigReport.jsonLogs(Map.of("QUARKUS_LOG_CONSOLE_JSON_ENABLED", "0"), none)).isFalse();
    }
}
