package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/** At-least-once with stable ids: walhook killed with SIGKILL twice mid-stream loses nothing. */
class CrashRecoveryIT {

    private static final Duration WAIT = Duration.ofSeconds(120);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int ROWS = 3000;

    @Test
    void sigkillTwiceMidStreamDeliversEveryChangeWithTheSameIds() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("crash");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE events (id int PRIMARY KEY, payload text)");
        }
        Map<Integer, Set<String>> idsByRow = new ConcurrentHashMap<>();
        try (WebhookReceiver receiver = WebhookReceiver.start(request -> {
            try {
                JsonNode event = JSON.readTree(request.body());
                idsByRow.computeIfAbsent(event.at("/new/id").asInt(), k -> ConcurrentHashMap.newKeySet())
                        .add(request.header("webhook-id"));
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        })) {
            Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                    "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"));
            AtomicReference<Exception> writerFailed = new AtomicReference<>();
            Thread writer = new Thread(() -> {
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    for (int tx = 0; tx < ROWS / 10; tx++) {
                        s.execute("INSERT INTO events SELECT g, md5(g::text) FROM generate_series(" + (tx * 10 + 1)
                                + ", " + (tx * 10 + 10) + ") g");
                        Thread.sleep(5);
                    }
                } catch (Exception e) {
                    writerFailed.set(e);
                }
            }, "writer");

            WalhookProcess first = WalhookProcess.start(env);
            first.awaitReady(WAIT);
            writer.start();
            await().atMost(WAIT).until(() -> idsByRow.size() >= 500);
            first.close(); // SIGKILL

            WalhookProcess second = WalhookProcess.start(env);
            second.awaitReady(WAIT);
            await().atMost(WAIT).until(() -> idsByRow.size() >= 1500);
            second.close(); // SIGKILL again

            try (WalhookProcess third = WalhookProcess.start(env)) {
                third.awaitReady(WAIT);
                writer.join(WAIT.toMillis());
                assertThat(writerFailed.get()).isNull();
                await().atMost(WAIT).until(() -> idsByRow.size() == ROWS);
            }
            // every change arrived, and a change delivered more than once always had the same id
            assertThat(idsByRow.keySet()).hasSize(ROWS);
            assertThat(idsByRow.values()).allSatisfy(ids -> assertThat(ids).hasSize(1));
            assertThat(idsByRow.values().stream().flatMap(Set::stream).distinct().count()).isEqualTo(ROWS);
        }
    }
}
