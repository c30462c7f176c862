package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/** A 50,000-change stream through four concurrent lanes: everything arrives, signed, each row in order. */
class StreamDeliveryIT {

    private static final Duration WAIT = Duration.ofMinutes(3);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String SECRET = "whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=";
    private static final int ROWS = 10_000;
    private static final int UPDATES = 4;

    @Test
    void fiftyThousandChangesArriveSignedWithPerRowOrder() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("stream");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE counters (id int PRIMARY KEY, n int NOT NULL)");
        }
        byte[] key = Base64.getDecoder().decode(SECRET.substring("whsec_".length()));
        Map<Integer, List<Integer>> seen = new ConcurrentHashMap<>();
        AtomicInteger badSignatures = new AtomicInteger();
        AtomicInteger events = new AtomicInteger();
        List<String> refused = java.util.Collections.synchronizedList(new ArrayList<>());
        try (WebhookReceiver receiver = WebhookReceiver.start(request -> {
            try {
                Mac mac = Mac.getInstance("HmacSHA256");
                mac.init(new SecretKeySpec(key, "HmacSHA256"));
                String signed = request.header("webhook-id") + "." + request.header("webhook-timestamp") + "." + request.body();
                String expected = "v1," + Base64.getEncoder().encodeToString(mac.doFinal(signed.getBytes(StandardCharsets.UTF_8)));
                if (!List.of(request.header("webhook-signature").split(" ")).contains(expected)) {
                    badSignatures.incrementAndGet();
                }
                JsonNode batch = JSON.readTree(request.body());
                if (!batch.isArray()) {
                    refused.add(request.body());
                    throw new IllegalStateException("a batching subscription sent a body that is not an array");
                }
                for (JsonNode event : batch) {
                    JsonNode row = event.get("new");
                    // a lane is single-threaded: one row's changes are recorded in arrival order
                    seen.computeIfAbsent(row.get("id").asInt(), k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                            .add(row.get("n").asInt());
                    events.incrementAndGet();
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database, "WALHOOK_DELIVERY_CONCURRENCY", "4",
                     "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                     "WALHOOK_SUBSCRIPTIONS_ALL_SECRET", SECRET,
                     "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "100",
                     "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_WAIT_MS", "10"))) {
            walhook.awaitReady(WAIT);
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                for (int start = 1; start <= ROWS; start += 1000) {
                    s.execute("INSERT INTO counters SELECT g, 0 FROM generate_series(" + start + ", " + (start + 999) + ") g");
                }
                for (int n = 1; n <= UPDATES; n++) {
                    for (int start = 1; start <= ROWS; start += 1000) {
                        s.execute("UPDATE counters SET n = " + n + " WHERE id BETWEEN " + start + " AND " + (start + 999));
                    }
                }
            }
            try {
                await().atMost(WAIT).until(() -> events.get() >= ROWS * (UPDATES + 1) || !refused.isEmpty());
            } catch (org.awaitility.core.ConditionTimeoutException e) {
                throw new AssertionError(events.get() + " of " + ROWS * (UPDATES + 1) + " events arrived; walhook's output:\n"
                        + walhook.output(), e);
            }
            assertThat(refused).as("bodies that are not JSON arrays").isEmpty();
        }
        assertThat(events.get()).isEqualTo(ROWS * (UPDATES + 1));
        assertThat(badSignatures.get()).isZero();
        assertThat(seen).hasSize(ROWS);
        assertThat(seen.values()).allSatisfy(ns -> assertThat(ns).containsExactly(0, 1, 2, 3, 4));
    }
}
