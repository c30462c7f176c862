package io.walhook.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;
import io.quarkus.test.junit.QuarkusTest;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TcpProxy;
import io.walhook.testing.TestPostgres;

/**
 * A pooled connection a failover left half-open is found out before it is used, not by the
 * request that uses it: the pool asks a connection idle for more than 5 s to answer (within 5 s)
 * before handing it out. Without that, the request waited the 30 s socket timeout, then failed.
 */
@QuarkusTest
@QuarkusTestResource(value = StaleConnectionTest.Resource.class, restrictToAnnotatedClass = true)
@org.junit.jupiter.api.extension.ExtendWith(OpenApiContract.class)
class StaleConnectionTest {

    static TcpProxy proxy;

    /** A database reached through a proxy that can leave every connection half-open. */
    public static class Resource implements QuarkusTestResourceLifecycleManager {

        @Override
        public Map<String, String> start() {
            PostgresServer server = TestPostgres.shared();
            String database = server.createDatabase("stale");
            proxy = TcpProxy.to(server.host(), server.port());
            String credentials = server.password() == null || server.password().isEmpty() ? server.user()
                    : server.user() + ":" + server.password();
            Map<String, String> config = new HashMap<>();
            config.put("walhook.source.url", "postgresql://" + credentials + "@" + server.host() + ":" + proxy.port() + "/"
                    + database);
            config.put("walhook.slot", database);
            config.put("walhook.api-token", "t");
            config.put("walhook.allow-private-destinations", "true");
            return config;
        }

        @Override
        public void stop() {
            proxy.close();
        }
    }

    @ConfigProperty(name = "quarkus.http.test-port")
    int port;

    @Test
    void aPooledConnectionLeftHalfOpenIsReplacedBeforeARequestUsesIt() throws Exception {
        // a short client timeout, far under the 30 s a stale connection would hold the request
        HttpClient http = HttpClient.newHttpClient();
        HttpRequest list = HttpRequest.newBuilder(URI.create("http://localhost:" + port + "/subscriptions"))
                .header("Authorization", "Bearer t").timeout(Duration.ofSeconds(20)).GET().build();
        assertThat(http.send(list, HttpResponse.BodyHandlers.ofString()).statusCode()).isEqualTo(200);
        int before = proxy.connections();

        proxy.loseServerOfAll();
        // idle past the validation interval, the API's connection is asked before it is handed out again
        await().pollDelay(Duration.ofSeconds(6)).atMost(Duration.ofSeconds(60)).untilAsserted(() -> {
            HttpResponse<String> answer = http.send(list, HttpResponse.BodyHandlers.ofString());
            assertThat(answer.statusCode()).as(answer.body()).isEqualTo(200);
        });
        assertThat(proxy.connections()).as("new connections through the proxy").isGreaterThan(before);
    }
    /**
     * After the database closed every connection (a restart), the first API requests are answered,
     * not 503: a backfill read refreshed the subscriptions through delivery's pool, whose connections
     * used in the last 5 s are handed out unasked (GuaranteesIT's crash had such a 503).
     */
    @Test
    void connectionsTheServerClosedAreNotUsedByTheNextRequests() throws Exception {
        try (java.sql.Connection c = TestPostgres.shared().connect(database());
             java.sql.Statement s = c.createStatement()) {
            s.execute("CREATE TABLE restarted_rows (id int PRIMARY KEY)");
        }
        HttpClient http = HttpClient.newHttpClient();
        String id = json(http.send(request("/subscriptions").header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"name\": \"restarted\", \"tables\": [\"public.restarted_rows\"],"
                        + " \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:9/hook\"}}")).build(),
                HttpResponse.BodyHandlers.ofString())).get("id").asText();
        String backfills = "/subscriptions/" + id + "/backfills";
        String backfill = json(http.send(request(backfills).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{}")).build(), HttpResponse.BodyHandlers.ofString())).get("id").asText();
        for (int round = 0; round < 5; round++) {
            proxy.dropAll();
            for (String path : new String[] {backfills + "/" + backfill, backfills, "/subscriptions/" + id, "/status",
                    "/subscriptions/" + id + "/dead-letters"}) {
                HttpResponse<String> answer = http.send(request(path).GET().build(), HttpResponse.BodyHandlers.ofString());
                assertThat(answer.statusCode()).as(path + ": " + answer.body()).isEqualTo(200);
            }
        }
    }

    @ConfigProperty(name = "quarkus.datasource.jdbc.url")
    String jdbcUrl;

    private String database() {
        return jdbcUrl.substring(jdbcUrl.lastIndexOf('/') + 1);
    }

    private HttpRequest.Builder request(String path) {
        return HttpRequest.newBuilder(URI.create("http://localhost:" + port + path)).header("Authorization", "Bearer t")
                .timeout(Duration.ofSeconds(20));
    }

    private static com.fasterxml.jackson.databind.JsonNode json(HttpResponse<String> answer) throws Exception {
        assertThat(answer.statusCode()).as(answer.body()).isBetween(200, 202);
        return new com.fasterxml.jackson.databind.ObjectMapper().readTree(answer.body());
    }
}
