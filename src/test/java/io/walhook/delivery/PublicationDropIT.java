package io.walhook.delivery;

import static io.walhook.delivery.ItemsSetup.TOKEN;
import static io.walhook.delivery.ItemsSetup.env;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.junit.jupiter.api.Test;

import io.walhook.testing.ApiClient;
import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * PostgreSQL 18 no longer stops the stream when the publication it names is dropped: it warns in
 * its own log and sends none of the changes committed while the publication is missing. Creating
 * it again brings none back. walhook streamed on, ready and silent, while those changes were lost;
 * it now looks at its publication while it streams, and is not ready, says why in /status and its
 * log, and counts the drop, until the publication is there again; and one dropped while walhook was
 * away, which it creates again as it starts, is logged and counted too.
 */
class PublicationDropIT {

    private static final Duration WAIT = Duration.ofMinutes(2);

    @Test
    void aPublicationDroppedWhileWalhookStreamsMakesItNotReadyAndSaySoUntilItIsBack() throws Exception {
        EmbeddedPostgres pg = EmbeddedPostgres.builder().major(18).start();
        try {
            String database = ItemsSetup.itemsDatabase(pg, "publication_drop");
            Set<Integer> received = ConcurrentHashMap.newKeySet();
            try (WebhookReceiver receiver = WebhookReceiver.start(request -> ItemsSetup.events(request)
                            .forEach(event -> received.add(event.get("new").get("id").asInt())));
                    WalhookProcess walhook = WalhookProcess.start(env(pg, database,
                            "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all")))) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                pg.execute(database, "INSERT INTO items VALUES (1, 0)");
                await().atMost(WAIT).until(() -> received.contains(1));

                pg.execute(database, "DROP PUBLICATION walhook");
                pg.execute(database, "INSERT INTO items VALUES (2, 0)"); // PostgreSQL 18 sends nothing of it
                await().atMost(Duration.ofSeconds(60)).until(() -> walhook.status("/q/health/ready") == 503);
                assertThat(api.get("/q/health/ready").text()).contains("PUBLICATION_MISSING");
                ApiClient.Answer status = api.get("/status");
                assertThat(status.body().get("replication").get("state").asText()).isEqualTo("PUBLICATION_MISSING");
                assertThat(status.body().get("replication").get("last_error").asText())
                        .startsWith("publication walhook does not exist: it was dropped while walhook streams");
                assertThat(walhook.output()).contains("ERROR").contains("publication walhook does not exist");
                assertThat(api.get("/q/metrics").text()).contains("walhook_replication_publication_missing 1.0");

                pg.execute(database, "CREATE PUBLICATION walhook FOR ALL TABLES");
                walhook.awaitReady(Duration.ofSeconds(60));
                assertThat(api.get("/q/metrics").text()).contains("walhook_replication_publication_drops_total 1.0")
                        .contains("walhook_replication_publication_missing 0.0");
                pg.execute(database, "INSERT INTO items VALUES (3, 0)");
                await().atMost(WAIT).until(() -> received.contains(3));
                assertThat(received).as("what PostgreSQL 18 did not send while the publication was missing")
                        .doesNotContain(2);
                walhook.terminate();
                assertThat(walhook.awaitExit(WAIT)).as(walhook.output()).isZero();
            }
            // dropped while walhook is away: it creates it again when it starts, and says what that cost
            pg.execute(database, "DROP PUBLICATION walhook", "INSERT INTO items VALUES (4, 0)");
            try (WebhookReceiver receiver = WebhookReceiver.start(request -> ItemsSetup.events(request)
                            .forEach(event -> received.add(event.get("new").get("id").asInt())));
                    WalhookProcess walhook = WalhookProcess.start(env(pg, database,
                            "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all")))) {
                walhook.awaitReady(WAIT);
                assertThat(walhook.output()).contains("ERROR").contains("publication walhook did not exist and walhook created"
                        + " it, though it streamed from its slot before");
                assertThat(new ApiClient(walhook, TOKEN).get("/q/metrics").text())
                        .contains("walhook_replication_publication_drops_total 1.0");
                pg.execute(database, "INSERT INTO items VALUES (5, 0)");
                await().atMost(WAIT).until(() -> received.contains(5));
            }
        } finally {
            pg.stop();
        }
    }
}
