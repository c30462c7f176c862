package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * A destination's credentials (a URL's query string, an AMQP URL's user and password, header
 * values) are written to walhook and never come out of it: not in its log while deliveries fail,
 * not in /status, subscription views, test-fire outcomes or dead letters. A path segment that may
 * be a credential is shown by views only.
 */
class DestinationCredentialsIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String TOKEN = "credentials-token";
    /** Every credential below contains this; none of walhook's own words does. */
    private static final String SECRET = "s3cr3t";
    /** A token in a URL's path, as Slack's: views show it (the path is the destination), logs and errors never. */
    private static final String PATH_TOKEN = "Xq7mB2kLp9Rt4vWz8nYc3dFa";

    private static HttpResponse<String> call(WalhookProcess walhook, String method, String path, String body)
            throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(walhook.uri(path)).timeout(Duration.ofSeconds(60))
                .header("Authorization", "Bearer " + TOKEN);
        if (body != null) {
            request.header("Content-Type", "application/json");
        }
        return HTTP.send(request.method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                : HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    /** A port nothing listens on. */
    private static int closedPort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }

    @Test
    void destinationCredentialsAppearInNothingWalhookWritesOrAnswers() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("credentials");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY)");
        List<Socket> held = new CopyOnWriteArrayList<>();
        try (WebhookReceiver failing = WebhookReceiver.start();
             ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            failing.respond(request -> 500);
            // accepts connections and never answers: the request times out
            Thread acceptor = new Thread(() -> {
                while (!silent.isClosed()) {
                    try {
                        held.add(silent.accept());
                    } catch (IOException closed) {
                        return;
                    }
                }
            }, "silent-receiver");
            acceptor.setDaemon(true);
            acceptor.start();
            int refused = closedPort();
            Map<String, String> env = Map.ofEntries(Map.entry("WALHOOK_API_TOKEN", TOKEN),
                    Map.entry("WALHOOK_SOURCE_URL", pg.sourceUrl(database)),
                    Map.entry("WALHOOK_SLOT", database),
                    Map.entry("WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"),
                    Map.entry("WALHOOK_DELIVERY_REQUEST_TIMEOUT", "1s"),
                    Map.entry("WALHOOK_AMQP_URL", "amqp://amqp-user-" + SECRET + ":amqp-password-" + SECRET
                            + "@127.0.0.1:" + closedPort()),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_CFG_URL", failing.url("/cfg") + "?token=cfg-" + SECRET + "&b=1"),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_CFG_TABLES", "public.items"),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_CFG_RETRY_MAX_ATTEMPTS", "2"));
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                List<String> ids = new ArrayList<>();
                String retry = ", \"tables\": [\"public.items\"], \"retry\": {\"max_attempts\": 2}}";
                for (String body : List.of(
                        "{\"name\": \"failing\", \"destination\": {\"type\": \"webhook\", \"url\": \"" + failing.url("/api")
                                + "?token=" + SECRET + "\", \"headers\": {\"X-Api-Key\": \"header-" + SECRET + "\"}}" + retry,
                        "{\"name\": \"refused\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:"
                                + refused + "/r/T0AB12CD3/" + PATH_TOKEN + "?token=refused-" + SECRET + "\"}" + retry,
                        "{\"name\": \"silent-path\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:"
                                + silent.getLocalPort() + "/p/" + PATH_TOKEN + "\"}" + retry,
                        "{\"name\": \"silent\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:"
                                + silent.getLocalPort() + "/s?token=silent-" + SECRET + "\"}" + retry,
                        "{\"name\": \"queue\", \"destination\": {\"type\": \"amqp\", \"address\": \"items\"}" + retry)) {
                    HttpResponse<String> created = call(walhook, "POST", "/subscriptions", body);
                    assertThat(created.statusCode()).as(created.body()).isEqualTo(201);
                    ids.add(JSON.readTree(created.body()).get("id").asText());
                }
                ids.add("config:cfg");
                List<String> answers = new ArrayList<>();
                List<String> views = new ArrayList<>();
                for (String id : ids) {
                    answers.add(call(walhook, "POST", "/subscriptions/" + id + "/test", null).body());
                }
                // the registry reloads twice a second: a change made a second later is routed to them all
                await().pollDelay(Duration.ofSeconds(1)).atMost(WAIT).until(() -> call(walhook, "GET", "/status", null)
                        .body().contains("\"name\":\"silent\""));
                pg.execute(database, "INSERT INTO items VALUES (1)");

                // each subscription fails twice and parks the event, with its last error
                for (String id : ids) {
                    await().atMost(WAIT).until(() -> JSON.readTree(call(walhook, "GET", "/subscriptions/" + id
                            + "/dead-letters", null).body()).get("items").size() == 1);
                    String deadLetters = call(walhook, "GET", "/subscriptions/" + id + "/dead-letters", null).body();
                    assertThat(JSON.readTree(deadLetters).at("/items/0/last_error").asText()).as(id).isNotEmpty();
                    answers.add(deadLetters);
                    views.add(call(walhook, "GET", "/subscriptions/" + id, null).body());
                }
                String status = call(walhook, "GET", "/status", null).body();
                for (JsonNode subscription : JSON.readTree(status).get("subscriptions")) {
                    assertThat(subscription.get("last_error").asText()).as(subscription.toString()).isNotEmpty();
                }
                answers.add(status);
                views.add(call(walhook, "GET", "/subscriptions", null).body());

                String log = walhook.output();
                // the failures were logged, naming each destination without its credentials
                assertThat(log).contains("attempt 1 to " + failing.url("/api") + " failed (HTTP 500)")
                        .contains("attempt 1 to http://127.0.0.1:" + refused + "/r/T0AB12CD3/[redacted] failed")
                        .contains("attempt 1 to http://127.0.0.1:" + silent.getLocalPort() + "/p/[redacted] failed")
                        .contains("attempt 1 to http://127.0.0.1:" + silent.getLocalPort() + "/s failed")
                        .contains("attempt 1 to " + failing.url("/cfg") + " failed (HTTP 500)")
                        .contains("amqp://127.0.0.1:");
                assertThat(log).as("walhook's log").doesNotContain(SECRET).doesNotContain(PATH_TOKEN);
                assertThat(answers).as("walhook's answers").noneMatch(answer -> answer.contains(SECRET) || answer.contains(PATH_TOKEN));
                assertThat(views).as("subscription views").noneMatch(view -> view.contains(SECRET));
                assertThat(String.join("\n", views)).contains("http://127.0.0.1:" + refused + "/r/T0AB12CD3/" + PATH_TOKEN);
            }
        } finally {
            for (Socket socket : held) {
                socket.close();
            }
        }
    }
}
