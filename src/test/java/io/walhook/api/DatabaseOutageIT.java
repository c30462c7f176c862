package io.walhook.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;

/** The packaged walhook while its source database is down: the API says so (503 problems), then recovers. */
class DatabaseOutageIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String TOKEN = "outage-token";

    private static HttpResponse<String> get(WalhookProcess walhook, String path) throws Exception {
        return HTTP.send(HttpRequest.newBuilder(walhook.uri(path)).timeout(Duration.ofSeconds(60))
                .header("Authorization", "Bearer " + TOKEN).GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    private static void assertUnavailable(HttpResponse<String> response) throws Exception {
        assertThat(response.statusCode()).as(response.body()).isEqualTo(503);
        assertThat(response.headers().firstValue("Content-Type")).hasValueSatisfying(
                type -> assertThat(type).startsWith("application/problem+json"));
        JsonNode problem = JSON.readTree(response.body());
        assertThat(problem.get("status").asInt()).isEqualTo(503);
        assertThat(problem.get("detail").asText()).startsWith("the source database cannot be reached");
    }

    @Test
    void whileTheSourceDatabaseIsDownTheApiAnswersServiceUnavailableThenRecovers() throws Exception {
        EmbeddedPostgres pg = EmbeddedPostgres.builder().major(TestPostgres.defaultMajor()).start();
        try {
            String database = pg.createDatabase("outage");
            try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                    "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", TOKEN))) {
                walhook.awaitReady(WAIT);
                assertThat(get(walhook, "/status").statusCode()).isEqualTo(200);
                assertThat(get(walhook, "/subscriptions").statusCode()).isEqualTo(200);

                pg.pause();
                assertUnavailable(get(walhook, "/status"));
                assertUnavailable(get(walhook, "/subscriptions"));
                assertThat(walhook.isAlive()).as("an outage is waited out, not fatal").isTrue();
                // readiness, open to anyone, gives the state, not the reason: the reason names the database's host
                // and port, or its user ("password authentication failed for user ..."); /status and the log give it
                await().atMost(WAIT).untilAsserted(() -> {
                    HttpResponse<String> ready = HTTP.send(HttpRequest.newBuilder(walhook.uri("/q/health/ready"))
                            .timeout(Duration.ofSeconds(60)).GET().build(), HttpResponse.BodyHandlers.ofString());
                    assertThat(ready.statusCode()).isEqualTo(503);
                    assertThat(ready.body()).containsAnyOf("DISCONNECTED", "CONNECTING").doesNotContain("last_error")
                            .doesNotContain(Integer.toString(pg.port()));
                });
                // the /status asked while the database was down failed at once; its pool's wait for a connection
                // (5 s) then ended too, which the Vert.x client reported as an uncaught error of its own
                assertUnavailable(get(walhook, "/status"));
                await().during(Duration.ofSeconds(8)).atMost(Duration.ofSeconds(10))
                        .until(() -> !walhook.output().contains("already complete"));

                pg.resume();
                await().atMost(WAIT).until(() -> get(walhook, "/status").statusCode() == 200);
                await().atMost(WAIT).until(() -> get(walhook, "/subscriptions").statusCode() == 200);
            }
        } finally {
            pg.stop();
        }
    }

    /**
     * A fast shutdown of the database (pg_ctl restart -m fast) while changes wait for a receiver
     * that does not answer: PostgreSQL ends every session, walhook's lock and pool with them, and
     * its walsender then waits for walhook to confirm all it sent, which walhook, unable to
     * deliver or queue those changes, never did, while it answered every keepalive: the shutdown
     * hung until someone killed one of them. Walhook now lets go of the stream once the database
     * says it is shutting down, the shutdown ends, and every change is delivered once it is back.
     */
    @Test
    void aFastShutdownWhileChangesWaitForAReceiverThatDoesNotAnswerEnds() throws Exception {
        EmbeddedPostgres pg = EmbeddedPostgres.builder().major(TestPostgres.defaultMajor()).start();
        java.util.concurrent.CountDownLatch answer = new java.util.concurrent.CountDownLatch(1);
        io.walhook.testing.WebhookReceiver receiver = io.walhook.testing.WebhookReceiver.start();
        receiver.respond(request -> {
            try {
                answer.await(2, java.util.concurrent.TimeUnit.MINUTES); // takes the request, says nothing
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return 204;
        });
        try {
            String database = pg.createDatabase("fast_stop");
            try (java.sql.Connection c = pg.connect(database); java.sql.Statement s = c.createStatement()) {
                s.execute("CREATE TABLE pings (id int PRIMARY KEY)");
            }
            try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                    "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", TOKEN,
                    "WALHOOK_SUBSCRIPTIONS_HUNG_URL", receiver.url("/hook"),
                    "WALHOOK_DELIVERY_REQUEST_TIMEOUT", "5m"))) {
                walhook.awaitReady(WAIT);
                try (java.sql.Connection c = pg.connect(database); java.sql.Statement s = c.createStatement()) {
                    for (int id = 1; id <= 5; id++) {
                        s.execute("INSERT INTO pings VALUES (" + id + ")");
                    }
                }
                await().atMost(WAIT).until(() -> !receiver.requests().isEmpty());
                pg.pause(); // a fast stop: fails when it has not ended within 15 s
                pg.resume();
                answer.countDown();
                await().atMost(WAIT).until(() -> receiver.requests().stream()
                        .map(r -> r.body().replaceAll("(?s).*\"new\":\\{\"id\":(\\d+).*", "$1"))
                        .collect(java.util.stream.Collectors.toSet()).equals(Set.of("1", "2", "3", "4", "5")));
                assertThat(walhook.isAlive()).isTrue();
            }
        } finally {
            answer.countDown();
            receiver.close();
            pg.stop();
        }
    }

    @Test
    void walhookStartedWhileItsDatabaseHangsWaitsForIt() throws Exception {
        EmbeddedPostgres pg = EmbeddedPostgres.builder().major(TestPostgres.defaultMajor()).start();
        try {
            String database = pg.createDatabase("hung_start");
            pg.freeze(); // taking connections, answering nothing: a server too busy to answer
            try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                    "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", TOKEN))) {
                // longer than the pool waits for a connection (5 s): a configuration error would have exited by now
                await().during(Duration.ofSeconds(12)).atMost(Duration.ofSeconds(15)).until(walhook::isAlive);
                pg.thaw();
                walhook.awaitReady(WAIT);
                assertThat(get(walhook, "/status").statusCode()).isEqualTo(200);
            }
        } finally {
            pg.thaw(); // stopped, it would not hear pg_ctl's stop
            pg.stop();
        }
    }
}
