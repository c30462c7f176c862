package io.walhook.backfill;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.ApiClient;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * A read event's id is its backfill's and its row key's, the same wherever walhook runs: a key
 * holding a {@code timestamptz} was hashed as the backfill's session printed it, in the time
 * zone of walhook's JVM (pgjdbc sends the JVM's zone when it connects, after the options that
 * pin UTC), so a row read again after a failover to an instance in another zone, or a restart
 * with another {@code TZ}, came with another id, and receivers that drop an id seen twice took it twice.
 */
class BackfillTimeZoneIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void aReadEventsIdIsTheSameWhateverTheTimeZoneWalhookRunsIn() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_zone");
        pg.execute(database, "CREATE TABLE moments (at timestamptz PRIMARY KEY, n int)",
                "INSERT INTO moments VALUES ('2026-01-01 00:00:00+00', 1), ('2026-07-01 12:30:00.25+00', 2)");
        Map<String, String> ids = new ConcurrentHashMap<>();
        try (WebhookReceiver receiver = WebhookReceiver.start(request -> {
                    try {
                        JsonNode body = JSON.readTree(request.body());
                        for (JsonNode event : body.isArray() ? body : JSON.createArrayNode().add(body)) {
                            if ("read".equals(event.path("op").asText())) {
                                ids.put(event.path("new").path("n").asText(), event.path("id").asText());
                            }
                        }
                    } catch (java.io.IOException e) {
                        throw new IllegalStateException(e);
                    }
                });
                WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                        "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", "zone-token",
                        "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                        "TZ", "Asia/Kolkata"))) { // UTC+05:30: its zone printed every key otherwise
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, "zone-token");
            ApiClient.Answer started = api.post("/subscriptions/config:all/backfills", "{}");
            assertThat(started.status()).as(started.text()).isEqualTo(202);
            UUID backfill = UUID.fromString(started.body().get("id").asText());
            await().atMost(WAIT).until(() -> ids.size() == 2);
            // the key as PostgreSQL prints it in UTC: what every walhook hashes, wherever it runs
            byte[] key;
            try (java.sql.Connection c = pg.connect(database);
                    java.sql.PreparedStatement s = c.prepareStatement("SELECT id_key FROM walhook.backfill WHERE id = ?")) {
                s.setObject(1, backfill);
                try (java.sql.ResultSet rs = s.executeQuery()) {
                    assertThat(rs.next()).isTrue();
                    key = rs.getBytes(1);
                }
            }
            assertThat(ids).containsEntry("1", BackfillRunner.eventId(backfill, key, "public.moments", "2026-01-01 00:00:00+00"))
                    .containsEntry("2", BackfillRunner.eventId(backfill, key, "public.moments", "2026-07-01 12:30:00.25+00"));
        }
    }
}
