package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;

/** The packaged jar logs plain lines by default and one JSON object per line with QUARKUS_LOG_CONSOLE_JSON_ENABLED=true. */
class JsonLogIT {

    private static final String SWITCH = "QUARKUS_LOG_CONSOLE_JSON_ENABLED";
    private static final String UNREACHABLE = "postgresql://app:secret@127.0.0.1:1/app";
    private static final ObjectMapper JSON = new ObjectMapper();

    private static List<String> lines(String output) {
        return Arrays.stream(output.split("\n")).filter(l -> !l.isBlank()).toList();
    }

    /** Every line of the output as a JSON object; fails naming the first line that is not one. */
    private static List<JsonNode> parseEveryLine(String output) {
        List<JsonNode> records = new ArrayList<>();
        List<String> lines = lines(output);
        if (!output.endsWith("\n") && !lines.isEmpty()) {
            lines = lines.subList(0, lines.size() - 1); // a line being written while we read
        }
        for (String line : lines) {
            JsonNode record;
            try {
                record = JSON.readTree(line);
            } catch (Exception e) {
                throw new AssertionError("not a JSON line: " + line + "\nwhole output:\n" + output, e);
            }
            assertThat(record.isObject()).as(line).isTrue();
            assertThat(record.hasNonNull("timestamp") && record.hasNonNull("level") && record.hasNonNull("message"))
                    .as("timestamp, level and message in " + line).isTrue();
            records.add(record);
        }
        return records;
    }

    @Test
    void aStartupErrorIsOneJsonRecordNamingTheVariable() throws Exception {
        try (WalhookProcess walhook = WalhookProcess.start(Map.of(SWITCH, "true", "WALHOOK_SOURCE_URL", UNREACHABLE))) {
            int status = walhook.awaitExit(Duration.ofSeconds(60));
            String output = walhook.output();
            assertThat(status).as(output).isEqualTo(StartupCheck.EXIT_CONFIG);
            List<JsonNode> records = parseEveryLine(output);
            List<JsonNode> naming = records.stream().filter(r -> r.get("message").asText().contains("WALHOOK_SOURCE_URL"))
                    .toList();
            assertThat(naming).as(output).hasSize(1);
            assertThat(naming.get(0).get("level").asText()).isEqualTo("ERROR");
            assertThat(naming.get(0).get("message").asText()).contains("127.0.0.1:1").doesNotContain("secret@");
            assertThat(naming.get(0).get("loggerName").asText()).isEqualTo(StartupCheck.class.getName());
        }
    }

    @Test
    void aValueQuarkusCannotMapIsOneJsonRecordNamingTheVariable() throws Exception {
        try (WalhookProcess walhook = WalhookProcess.start(Map.of(SWITCH, "true", "WALHOOK_SOURCE_URL", UNREACHABLE,
                "WALHOOK_DELIVERY_RETRY_WINDOW", "8d"))) {
            int status = walhook.awaitExit(Duration.ofSeconds(60));
            String output = walhook.output();
            assertThat(status).as(output).isEqualTo(StartupCheck.EXIT_CONFIG);
            List<JsonNode> naming = parseEveryLine(output).stream()
                    .filter(r -> r.get("message").asText().contains("WALHOOK_DELIVERY_RETRY_WINDOW")).toList();
            assertThat(naming).as(output).hasSize(1);
            assertThat(naming.get(0).get("level").asText()).isEqualTo("ERROR");
            assertThat(naming.get(0).get("message").asText())
                    .isEqualTo("walhook cannot start: WALHOOK_DELIVERY_RETRY_WINDOW is 8d; it must be at most 7d");
            assertThat(naming.get(0).get("loggerName").asText()).isEqualTo(StartupCheck.class.getName());
        }
    }

    @Test
    void plainLinesByDefault() throws Exception {
        try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", UNREACHABLE))) {
            assertThat(walhook.awaitExit(Duration.ofSeconds(60))).isEqualTo(StartupCheck.EXIT_CONFIG);
            String output = walhook.output();
            List<String> naming = lines(output).stream().filter(l -> l.contains("WALHOOK_SOURCE_URL")).toList();
            assertThat(naming).as(output).hasSize(1);
            assertThat(naming.get(0)).as("a plain line").doesNotStartWith("{").contains("ERROR");
        }
    }

    @Test
    void aRunningWalhookLogsOnlyJson() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("jsonlog");
        try (java.sql.Connection c = pg.connect(database); java.sql.Statement s = c.createStatement()) {
            s.execute("CREATE TABLE pings (id int PRIMARY KEY)");
        }
        try (WalhookProcess walhook = WalhookProcess.start(Map.of(SWITCH, "true",
                "WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                // nothing listens on port 1: every attempt fails and is logged
                "WALHOOK_SUBSCRIPTIONS_DOWN_URL", "http://127.0.0.1:1/hook"))) {
            walhook.awaitReady(Duration.ofSeconds(60));
            try (java.sql.Connection c = pg.connect(database); java.sql.Statement s = c.createStatement()) {
                s.execute("INSERT INTO pings VALUES (1)");
            }
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(30))
                    .until(() -> walhook.output().contains("attempt 2 to"));
            String output = walhook.output();
            List<JsonNode> records = parseEveryLine(output);
            assertThat(records).as(output)
                    .anySatisfy(r -> assertThat(r.get("message").asText()).startsWith("walhook ready: source "));
            // a failed attempt's record carries the subscription, its id, the event and the attempt as fields
            assertThat(records).as(output).anySatisfy(r -> {
                assertThat(r.get("level").asText()).isEqualTo("WARN");
                assertThat(r.at("/mdc/subscription").asText()).isEqualTo("down");
                assertThat(r.at("/mdc/attempt").asText()).isEqualTo("2");
                assertThat(r.at("/mdc/event").asText()).matches("[0-9A-F]{16}-0001");
                assertThat(r.at("/mdc/subscription_id").asText()).isEqualTo("config:down");
            });
        }
    }
}
