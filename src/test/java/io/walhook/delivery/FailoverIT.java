package io.walhook.delivery;

import static io.walhook.delivery.ItemsSetup.TOKEN;
import static io.walhook.delivery.ItemsSetup.env;
import static io.walhook.delivery.ItemsSetup.events;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;

import io.walhook.testing.ApiClient;
import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.TcpProxy;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * A failover that leaves walhook's connections half-open: the server behind them is gone and
 * nothing tells walhook (no FIN, no RST: what it writes is taken and never answered), while a new
 * server takes connections at the same address. Every session walhook holds (the stream, its pool,
 * its lock, a backfill's reader) must find out and go on from the new server within seconds, not
 * when TCP gives up.
 */
class FailoverIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final int TABLE_ROWS = 20_000;
    private static final int LIVE_ROWS = 600;

    @Test
    void everySessionLeftHalfOpenByAFailoverIsReplacedAndNothingIsLost() throws Exception {
        // a short wal_sender_timeout: the stream's own patience follows it (docs/operations.md)
        EmbeddedPostgres pg = EmbeddedPostgres.builder().major(TestPostgres.defaultMajor())
                .setting("wal_sender_timeout", "10s").start();
        try (TcpProxy proxy = TcpProxy.to(pg.host(), pg.port())) {
            String database = pg.createDatabase("failover");
            pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int)",
                    "INSERT INTO items SELECT g, 0 FROM generate_series(1, " + TABLE_ROWS + ") g");
            Map<Integer, Set<Integer>> seen = new ConcurrentHashMap<>(); // row: the values of n it arrived with
            try (WebhookReceiver receiver = WebhookReceiver.start(request -> {
                for (JsonNode event : events(request)) {
                    seen.computeIfAbsent(event.at("/new/id").asInt(), k -> ConcurrentHashMap.newKeySet())
                            .add(event.at("/new/n").asInt());
                }
            })) {
                // every third request fails: retried while the connections break
                AtomicInteger requests = new AtomicInteger();
                receiver.respond(request -> requests.incrementAndGet() % 3 == 0 ? 500 : 204);
                Map<String, String> variables = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                        "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "50");
                variables.put("WALHOOK_SOURCE_URL", pg.sourceUrl(database)
                        .replace(":" + pg.port() + "/", ":" + proxy.port() + "/"));
                try (WalhookProcess walhook = WalhookProcess.start(variables)) {
                    walhook.awaitReady(WAIT);
                    ApiClient api = new ApiClient(walhook, TOKEN);
                    ApiClient.Answer started = api.post("/subscriptions/config:all/backfills", "{\"chunk_size\": 100}");
                    assertThat(started.status()).as(started.text()).isEqualTo(202);
                    String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                    insertLive(pg, database, 1, LIVE_ROWS / 2);
                    await().atMost(WAIT).until(() -> seen.size() >= 2_000);
                    assertThat(api.get("/status").status()).isEqualTo(200); // the reactive pool has a connection
                    String lost = valueOf(pg, database, "now()");

                    proxy.loseServerOfAll();
                    insertLive(pg, database, LIVE_ROWS / 2 + 1, LIVE_ROWS);

                    try {
                        await().atMost(WAIT).ignoreExceptions()
                                .until(() -> "done".equals(api.get(path).body().get("state").asText()));
                        await().atMost(WAIT).until(() -> seen.size() == TABLE_ROWS + LIVE_ROWS);
                    } catch (org.awaitility.core.ConditionTimeoutException e) {
                        throw new AssertionError(seen.size() + " rows arrived\n" + walhook.threadDump(), e);
                    }
                    await().atMost(WAIT).until(() -> api.get("/status").status() == 200);
                    // and the sessions that wait for the server to speak first were replaced too
                    await().atMost(WAIT).until(() -> valueOf(pg, database, "(SELECT count(DISTINCT application_name)"
                            + " FROM pg_stat_activity WHERE datname = current_database() AND backend_start > '" + lost
                            + "' AND application_name IN ('walhook', 'walhook-lock', 'walhook-listen'))"), "3"::equals);
                    for (int id = TABLE_ROWS + 1; id <= TABLE_ROWS + LIVE_ROWS; id++) {
                        assertThat(seen.get(id)).as("live row %d", id).containsExactly(id);
                    }
                }
            }
        } finally {
            pg.stop();
        }
    }

    private static String valueOf(EmbeddedPostgres pg, String database, String expression) throws Exception {
        try (Connection c = pg.connect(database); Statement s = c.createStatement();
             java.sql.ResultSet rs = s.executeQuery("SELECT (" + expression + ")::text")) {
            rs.next();
            return rs.getString(1);
        }
    }

    /** Live rows past the table's, each in its own transaction. */
    private static void insertLive(EmbeddedPostgres pg, String database, int from, int to) throws Exception {
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            for (int i = from; i <= to; i++) {
                s.execute("INSERT INTO items VALUES (" + (TABLE_ROWS + i) + ", " + (TABLE_ROWS + i) + ")");
            }
        }
    }
}
