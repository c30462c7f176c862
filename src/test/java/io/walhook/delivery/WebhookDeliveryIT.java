package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
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

/** The packaged walhook, configured by environment variables, delivering to a real HTTP receiver. */
class WebhookDeliveryIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final String SECRET = "whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=";
    private static final ObjectMapper JSON = new ObjectMapper();

    private static boolean signatureVerifies(WebhookReceiver.Request request) throws Exception {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(Base64.getDecoder().decode(SECRET.substring(6)), "HmacSHA256"));
        String signed = request.header("webhook-id") + "." + request.header("webhook-timestamp") + "." + request.body();
        String expected = "v1," + Base64.getEncoder().encodeToString(mac.doFinal(signed.getBytes(StandardCharsets.UTF_8)));
        return List.of(request.header("webhook-signature").split(" ")).contains(expected);
    }

    /**
     * Another deployment's state schema on the same database, published too (both FOR ALL TABLES),
     * made before this walhook's slot: the stream never met its history's rows, and the first of
     * its tables it met was one of walhook's later ones (a subscription's edit writes what it
     * matched before first), whose changes were sent to this deployment's subscriptions.
     */
    @Test
    void anotherDeploymentsStateIsNotSentWhicheverOfItsTablesTheStreamMeetsFirst() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("foreign_state");
        org.postgresql.ds.PGSimpleDataSource other = new org.postgresql.ds.PGSimpleDataSource();
        other.setURL(pg.jdbcUrl(database));
        other.setUser(pg.user());
        other.setPassword(pg.password());
        io.walhook.config.SchemaMigrations.migrate(other, "walhook_other");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE marks (id int PRIMARY KEY)");
            s.execute("INSERT INTO walhook_other.subscription (id, name, body) VALUES"
                    + " ('6f1c2b6e-0000-4000-8000-0000000000f1', 'tenant', '{}')");
        }
        try (WebhookReceiver receiver = WebhookReceiver.start();
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all")))) {
            walhook.awaitReady(WAIT);
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute("INSERT INTO walhook_other.subscription_matched_before VALUES"
                        + " ('6f1c2b6e-0000-4000-8000-0000000000f1', '0/1', '{\"tables\": [\"payroll.*\"]}')");
                s.execute("INSERT INTO walhook_other.dropped_event VALUES ('tenant', 'dropped-1', '0/1')");
                s.execute("INSERT INTO marks VALUES (1)");
            }
            await().atMost(WAIT).until(() -> receiver.requests("/all").stream()
                    .anyMatch(r -> r.body().contains("\"table\":\"marks\"")));
            assertThat(receiver.requests("/all")).extracting(WebhookReceiver.Request::body)
                    .noneMatch(body -> body.contains("walhook_other"));
        }
    }

    @Test
    void deliversRoutedSignedEventsAndCloudEventsRetryingFailuresAndStoppingAtGone() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("delivery");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE orders (id int PRIMARY KEY, status text, amount numeric(10,2))");
        }
        Map<String, AtomicInteger> attempts = new ConcurrentHashMap<>();
        java.util.concurrent.atomic.AtomicBoolean gone = new java.util.concurrent.atomic.AtomicBoolean(true);
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (request.path().equals("/gone")) {
                    return gone.get() ? 410 : 204;
                }
                // the first two attempts at order 2's insert fail
                int attempt = attempts.computeIfAbsent(request.path() + request.header("webhook-id"),
                        k -> new AtomicInteger()).incrementAndGet();
                return request.path().equals("/hook") && request.body().contains("\"new\":{\"id\":2,") && attempt <= 2
                        ? 503 : 204;
            });
            Map<String, String> env = Map.ofEntries(Map.entry("WALHOOK_API_TOKEN", "t0ken"),
                    Map.entry("WALHOOK_SOURCE_URL", pg.sourceUrl(database)),
                    Map.entry("WALHOOK_SLOT", database),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_SHOP_URL", receiver.url("/hook")),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_SHOP_TABLES", "public.orders"),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_SHOP_SECRET", SECRET),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_BIG_URL", receiver.url("/ce")),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_BIG_FORMAT", "cloudevents-binary"),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_BIG_OPERATIONS", "insert"),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_BIG_FILTER", "new.amount > 100"),
                    Map.entry("WALHOOK_SUBSCRIPTIONS_OLD_URL", receiver.url("/gone")));
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    s.execute("INSERT INTO orders VALUES (1, 'new', 12.50)");
                    s.execute("INSERT INTO orders VALUES (2, 'new', 150)");
                    s.execute("UPDATE orders SET status = 'paid' WHERE id = 1");
                    s.execute("DELETE FROM orders WHERE id = 2");
                }
                // four events, one of them tried three times
                await().atMost(WAIT).until(() -> receiver.requests("/hook").size() >= 6);

                List<WebhookReceiver.Request> hook = receiver.requests("/hook");
                Map<Integer, List<String>> byRow = new java.util.TreeMap<>();
                for (WebhookReceiver.Request r : hook) {
                    JsonNode event = JSON.readTree(r.body());
                    assertThat(r.header("webhook-id")).isEqualTo(event.get("id").asText());
                    int row = (event.get("new").isNull() ? event.get("key") : event.get("new")).get("id").asInt();
                    byRow.computeIfAbsent(row, k -> new java.util.ArrayList<>()).add(event.get("op").asText());
                }
                // order 2's insert failed twice and was retried in place: each row's changes arrive in commit order
                assertThat(byRow).containsEntry(1, List.of("insert", "update"))
                        .containsEntry(2, List.of("insert", "insert", "insert", "delete"));
                List<WebhookReceiver.Request> order2 = hook.stream().filter(r -> r.body().contains("\"new\":{\"id\":2,")).toList();
                assertThat(order2).extracting(r -> r.header("webhook-id")).containsOnly(order2.get(0).header("webhook-id"));
                assertThat(Duration.between(order2.get(0).receivedAt(), order2.get(1).receivedAt()))
                        .as("Retry-After: 1 honoured").isGreaterThanOrEqualTo(Duration.ofMillis(900));
                for (WebhookReceiver.Request request : hook) {
                    assertThat(request.header("content-type")).isEqualTo("application/json");
                    assertThat(signatureVerifies(request)).isTrue();
                    assertThat(Long.parseLong(request.header("webhook-timestamp")))
                            .isCloseTo(System.currentTimeMillis() / 1000, org.assertj.core.data.Offset.offset(120L));
                }

                await().atMost(WAIT).until(() -> receiver.requests("/ce").size() == 1);
                WebhookReceiver.Request ce = receiver.requests("/ce").get(0);
                JsonNode body = JSON.readTree(ce.body());
                assertThat(body.at("/new/id").asInt()).isEqualTo(2);
                assertThat(ce.header("ce-specversion")).isEqualTo("1.0");
                assertThat(ce.header("ce-id")).isEqualTo(body.get("id").asText());
                assertThat(ce.header("ce-type")).isEqualTo("io.walhook.insert");
                assertThat(ce.header("ce-subject")).isEqualTo("public.orders");
                assertThat(ce.header("ce-source")).isEqualTo("/walhook/" + database);
                assertThat(ce.header("webhook-signature")).isNull();

                // 410 Gone: the subscription is disabled at once; only requests already under way (one per
                // lane, first changes of rows 1 and 2) reached it, and the stream moves on
                assertThat(receiver.requests("/gone")).isNotEmpty().hasSizeLessThanOrEqualTo(2)
                        .allSatisfy(r -> assertThat(r.body()).contains("\"op\":\"insert\""));
                assertThat(walhook.output()).contains("subscription old disabled");
                // nothing is lost: its four events wait in the parked table, and no more are sent
                await().atMost(WAIT).until(() -> parked(pg, database, "old") == 4);
                int goneRequests = receiver.requests("/gone").size();

                // counted once the last answer is back (the receiver records a request before it answers)
                await().atMost(WAIT).untilAsserted(() -> assertThat(java.net.http.HttpClient.newHttpClient().send(
                        java.net.http.HttpRequest.newBuilder(walhook.uri("/q/metrics")).build(),
                        java.net.http.HttpResponse.BodyHandlers.ofString()).body())
                        .contains("walhook_delivery_events_total{subscription=\"shop\",subscription_id=\"config:shop\"} 4.0")
                        .contains("walhook_delivery_retries_total{subscription=\"shop\",subscription_id=\"config:shop\"} 2.0")
                        .contains("walhook_delivery_latency_seconds_count{subscription=\"shop\",subscription_id=\"config:shop\"}")
                        .contains("walhook_delivery_in_flight 0.0").contains("walhook_delivery_memory_bytes 0.0"));
                // a later change: the healthy subscription gets it, the disabled one parks it unsent
                int hookRequests = receiver.requests("/hook").size();
                pg.execute(database, "INSERT INTO orders VALUES (3, 'new', 5)");
                await().atMost(WAIT).until(() -> receiver.requests("/hook").size() > hookRequests);
                await().atMost(WAIT).until(() -> parked(pg, database, "old") == 5);
                assertThat(receiver.requests("/gone")).as("disabled: nothing more sent").hasSize(goneRequests);
                assertThat(oldStatus(walhook).get("disabled").asBoolean()).as("/status says so").isTrue();

                // the endpoint is back and an operator replays: enabled again, all five parked events arrive
                gone.set(false);
                java.net.http.HttpResponse<String> replay = replayOld(walhook);
                assertThat(replay.statusCode()).as(replay.body()).isEqualTo(200);
                await().atMost(WAIT).until(() -> parked(pg, database, "old") == 0);
                List<String> replayed = receiver.requests("/gone").subList(goneRequests, receiver.requests("/gone").size())
                        .stream().map(r -> r.header("webhook-id")).toList();
                assertThat(replayed).hasSize(5).doesNotHaveDuplicates();
                assertThat(walhook.output()).contains("subscription old enabled again");
                assertThat(oldStatus(walhook).get("disabled").asBoolean()).isFalse();
            }
        }
    }

    /**
     * A 410 disables the subscription until an operator says otherwise: held in memory only, a
     * restart (or a take-over) enabled it again and delivered its queue, and every later change, to
     * the endpoint that had said it was gone for good. It stays disabled until a replay.
     */
    @Test
    void aSubscriptionA410DisabledStaysDisabledAcrossRestartsUntilAReplay() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("gone_restart");
        pg.execute(database, "CREATE TABLE orders (id int PRIMARY KEY)");
        java.util.concurrent.atomic.AtomicBoolean gone = new java.util.concurrent.atomic.AtomicBoolean(true);
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> gone.get() ? 410 : 204);
            Map<String, String> env = Map.of("WALHOOK_API_TOKEN", "t0ken", "WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                    "WALHOOK_SLOT", database, "WALHOOK_SUBSCRIPTIONS_OLD_URL", receiver.url("/gone"));
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                pg.execute(database, "INSERT INTO orders VALUES (1)");
                await().atMost(WAIT).until(() -> parked(pg, database, "old") == 1);
                assertThat(oldStatus(walhook).get("disabled").asBoolean()).isTrue();
            }
            int answered = receiver.requests("/gone").size();
            gone.set(false); // it would take requests now: only a replay says they are wanted there again
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                pg.execute(database, "INSERT INTO orders VALUES (2)");
                await().atMost(WAIT).until(() -> parked(pg, database, "old") == 2);
                assertThat(oldStatus(walhook).get("disabled").asBoolean()).as("still disabled after the restart").isTrue();
                assertThat(walhook.output()).contains("subscription old stays disabled");
                assertThat(receiver.requests("/gone")).as("nothing sent to the endpoint that said it was gone")
                        .hasSize(answered);
                java.net.http.HttpResponse<String> replay = replayOld(walhook);
                assertThat(replay.statusCode()).as(replay.body()).isEqualTo(200);
                await().atMost(WAIT).until(() -> parked(pg, database, "old") == 0);
                assertThat(oldStatus(walhook).get("disabled").asBoolean()).isFalse();
            }
            try (WalhookProcess walhook = WalhookProcess.start(env)) { // enabled for good by the replay
                walhook.awaitReady(WAIT);
                pg.execute(database, "INSERT INTO orders VALUES (3)");
                await().atMost(WAIT).until(() -> receiver.requests("/gone").stream()
                        .anyMatch(r -> r.body().contains("\"new\":{\"id\":3}")));
                assertThat(oldStatus(walhook).get("disabled").asBoolean()).isFalse();
                assertThat(parked(pg, database, "old")).isZero();
            }
        }
    }

    @Test
    void knativeSinkBindingGetsStructuredCloudEventsWithItsOverrides() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("ksink");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE pings (id int PRIMARY KEY)");
        }
        try (WebhookReceiver receiver = WebhookReceiver.start();
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                     "K_SINK", receiver.url("/knative"), "K_CE_OVERRIDES", "{\"extensions\": {\"team\": \"shop\"}}"))) {
            walhook.awaitReady(WAIT);
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute("INSERT INTO pings VALUES (7)");
            }
            await().atMost(WAIT).until(() -> receiver.requests("/knative").size() == 1);
            WebhookReceiver.Request request = receiver.requests("/knative").get(0);
            assertThat(request.header("content-type")).isEqualTo("application/cloudevents+json");
            JsonNode event = JSON.readTree(request.body());
            assertThat(event.get("specversion").asText()).isEqualTo("1.0");
            assertThat(event.get("type").asText()).isEqualTo("io.walhook.insert");
            assertThat(event.get("subject").asText()).isEqualTo("public.pings");
            assertThat(event.get("team").asText()).isEqualTo("shop");
            assertThat(event.at("/data/new/id").asInt()).isEqualTo(7);
            assertThat(event.get("id").asText()).isEqualTo(event.at("/data/id").asText());
        }
    }

    /**
     * Destinations named with '_' in their host (Docker Compose's service names, many internal DNS
     * names; RFC 3986 allows it) get their changes, configured and created through the API: such
     * URLs were refused, java.net.URI reading their authority as no host at all.
     */
    @Test
    void destinationsWhoseHostNameHoldsAnUnderscoreGetTheirChanges() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse(Boolean.getBoolean("walhook.it.native"),
                "the test's DNS server is named through Vert.x's resolver (QUARKUS_VERTX_RESOLVER_SERVERS), which the"
                        + " native executable does not use");
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("underscore");
        pg.execute(database, "CREATE TABLE pings (id int PRIMARY KEY)");
        java.net.InetAddress loopback = java.net.InetAddress.getByName("127.0.0.1");
        try (WebhookReceiver receiver = WebhookReceiver.start();
             io.walhook.testing.DnsServer dns = io.walhook.testing.DnsServer.answering(Map.of(
                     "webhook_receiver.walhook.test", List.of(loopback), "hooks_v2.walhook.test", List.of(loopback)))) {
            int port = java.net.URI.create(receiver.url("/")).getPort();
            try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                    "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", "t0ken-for-underscores",
                    "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true", "QUARKUS_VERTX_RESOLVER_SERVERS", dns.address(),
                    "WALHOOK_SUBSCRIPTIONS_PINGS_URL", "http://webhook_receiver.walhook.test:" + port + "/configured"))) {
                walhook.awaitReady(WAIT);
                io.walhook.testing.ApiClient api = new io.walhook.testing.ApiClient(walhook, "t0ken-for-underscores");
                String url = "http://hooks_v2.walhook.test:" + port + "/created";
                String id = api.create("{\"name\": \"created\", \"tables\": [\"public.pings\"], \"destination\":"
                        + " {\"type\": \"webhook\", \"url\": \"" + url + "\"}}");
                assertThat(api.get("/subscriptions/" + id).body().at("/destination/url").asText()).isEqualTo(url);
                pg.execute(database, "INSERT INTO pings VALUES (1)");
                await().atMost(WAIT).until(() -> receiver.requests("/configured").size() == 1
                        && receiver.requests("/created").size() == 1);
                assertThat(JSON.readTree(receiver.requests("/created").get(0).body()).at("/new/id").asInt()).isEqualTo(1);
                assertThat(receiver.requests("/configured").get(0).header("host"))
                        .isEqualTo("webhook_receiver.walhook.test:" + port);
                assertThat(dns.queries()).as("the names were looked up where the test said").isPositive();
            }
        }
    }

    @Test
    void failingDestinationIsParkedSoTheSlotAdvancesAndOthersFlowThenCatchesUpInOrder() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "parking");
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<String> accepted = new java.util.concurrent.CopyOnWriteArrayList<>();
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (request.path().equals("/down")) {
                    if (down.get()) {
                        return 500;
                    }
                    accepted.add(request.header("webhook-id"));
                }
                return 204;
            });
            try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                    "WALHOOK_SLOT", database, "WALHOOK_DELIVERY_RETRY_WINDOW", "1s",
                    "WALHOOK_DELIVERY_PARKED_RETRY_INTERVAL", "1s",
                    "WALHOOK_SUBSCRIPTIONS_DOWN_URL", receiver.url("/down"),
                    "WALHOOK_SUBSCRIPTIONS_UP_URL", receiver.url("/up")))) {
                walhook.awaitReady(WAIT);
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    for (int i = 1; i <= 20; i++) {
                        s.execute("INSERT INTO items VALUES (" + i + ", 0)");
                        s.execute("UPDATE items SET n = n + 1 WHERE id = 1");
                    }
                }
                // the healthy subscription is not held back by the failing one
                await().atMost(WAIT).until(() -> receiver.requests("/up").size() == 40);
                List<String> ids = receiver.requests("/up").stream().map(r -> r.header("webhook-id")).toList();
                // the failing one's events are parked, and the slot moves past all of them
                await().atMost(WAIT).until(() -> parked(pg, database) == 40);
                String end = ids.get(ids.size() - 1).substring(0, 16);
                await().atMost(WAIT).until(() -> confirmedPast(pg, database, end));
                assertThat(accepted).isEmpty();

                down.set(false);
                await().atMost(WAIT).until(() -> accepted.size() == 40);
                assertThat(accepted).as("every parked event, once").containsExactlyInAnyOrderElementsOf(ids);
                // row 1 changed 21 times: its changes arrive in commit order
                List<String> row1 = acceptedChangesOfRow1(receiver, accepted);
                assertThat(row1).hasSize(21).isSorted();
                await().atMost(WAIT).until(() -> parked(pg, database) == 0);
                // and new events go straight through again
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    s.execute("INSERT INTO items VALUES (100, 0)");
                }
                await().atMost(WAIT).until(() -> accepted.size() == 41);
            }
        }
    }

    @Test
    void aDestinationThatTakesNothingIsQueuedDurablyOnceItsMemoryBudgetIsFullSoOthersAreNotHeldBack() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "fulllane");
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<String> accepted = new java.util.concurrent.CopyOnWriteArrayList<>();
        AtomicInteger upEvents = new AtomicInteger();
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (request.path().equals("/down")) {
                    if (down.get()) {
                        return 500;
                    }
                    accepted.add(request.header("webhook-id"));
                } else {
                    try {
                        upEvents.addAndGet(JSON.readTree(request.body()).size());
                    } catch (java.io.IOException e) {
                        return 400;
                    }
                }
                return 204;
            });
            // half an hour of retry window: only a full memory budget (4,000 events) can queue it durably sooner
            try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                    "WALHOOK_SLOT", database, "WALHOOK_DELIVERY_RETRY_WINDOW", "30m",
                    "WALHOOK_DELIVERY_MAX_BACKOFF", "1s", "WALHOOK_DELIVERY_CONCURRENCY", "1",
                    "WALHOOK_SUBSCRIPTIONS_DOWN_URL", receiver.url("/down"),
                    "WALHOOK_SUBSCRIPTIONS_UP_URL", receiver.url("/up"),
                    "WALHOOK_SUBSCRIPTIONS_UP_BATCH_MAX_EVENTS", "100"))) {
                walhook.awaitReady(WAIT);
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    s.execute("INSERT INTO items SELECT g, 0 FROM generate_series(1, 5000) g");
                    s.execute("UPDATE items SET n = 1 WHERE id = 1");
                }
                // the healthy subscription gets all 5,001 events while the failing one is still in its window
                await().atMost(WAIT).until(() -> upEvents.get() == 5001);
                await().atMost(WAIT).until(() -> parked(pg, database) == 5001);
                assertThat(walhook.output()).contains("subscription down: ")
                        .contains("is full and its destination takes nothing");
                String lastId = receiver.requests("/up").stream().map(r -> r.header("webhook-id"))
                        .max(String::compareTo).orElseThrow();
                await().atMost(WAIT).until(() -> confirmedPast(pg, database, lastId.substring(0, 16)));
                assertThat(accepted).isEmpty();

                // back: the parked events arrive, each once, a row's changes in commit order
                down.set(false);
                await().atMost(WAIT).until(() -> accepted.size() == 5001);
                assertThat(accepted).doesNotHaveDuplicates();
                List<String> row1 = acceptedChangesOfRow1(receiver, accepted);
                assertThat(row1).hasSize(2).isSorted();
                await().atMost(WAIT).until(() -> parked(pg, database) == 0);
            }
        }
    }

    @Test
    void aSubscriptionsOwnRetryPolicyParksItAfterItsAttemptsWhileOthersKeepRetrying() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("retrypolicy");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE jobs (id int PRIMARY KEY)");
        }
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> 503);
            // a global window far longer than the test: only a subscription's own policy can park
            try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                    "WALHOOK_SLOT", database, "WALHOOK_DELIVERY_RETRY_WINDOW", "30m",
                    "WALHOOK_DELIVERY_MAX_BACKOFF", "1s",
                    "WALHOOK_SUBSCRIPTIONS_CAPPED_URL", receiver.url("/capped"),
                    "WALHOOK_SUBSCRIPTIONS_CAPPED_RETRY_MAX_ATTEMPTS", "2",
                    "WALHOOK_SUBSCRIPTIONS_BRIEF_URL", receiver.url("/brief"),
                    "WALHOOK_SUBSCRIPTIONS_BRIEF_RETRY_WINDOW", "2s",
                    "WALHOOK_SUBSCRIPTIONS_PATIENT_URL", receiver.url("/patient")))) {
                walhook.awaitReady(WAIT);
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    s.execute("INSERT INTO jobs VALUES (1)");
                }
                // capped: parked after its second failed attempt, though the global window has 30 minutes to run
                await().atMost(WAIT).until(() -> parked(pg, database, "capped") == 1);
                // parked at its second failure (the log below); retried in memory after that, a second later at the soonest
                int cappedRequests = receiver.requests("/capped").size();
                assertThat(cappedRequests).isGreaterThanOrEqualTo(2);
                assertThat(parkedAttempts(pg, database, "capped")).as("its dead letter counts the attempts made")
                        .isBetween(2L, (long) cappedRequests);
                assertThat(walhook.output()).contains("subscription capped: ").contains("still failing after 2 attempts");
                // brief: parked when its own 2 s window ends
                await().atMost(WAIT).until(() -> parked(pg, database, "brief") == 1);
                assertThat(walhook.output()).contains("subscription brief: ").contains("still failing after its retry window of PT2S");
                // patient, on the global policy: still retrying in memory well past both, nothing parked
                long patientBefore = receiver.requests("/patient").size();
                await().atMost(WAIT).until(() -> receiver.requests("/patient").size() >= Math.max(patientBefore + 3, 8));
                assertThat(parked(pg, database, "patient")).isZero();
                // queued, capped's event is still tried, at its destination's pace, and every attempt counted
                await().atMost(WAIT).until(() -> parkedAttempts(pg, database, "capped") > 2);
                assertThat(parked(pg, database, "capped")).isEqualTo(1);
                assertThat(receiver.requests("/patient")).extracting(r -> r.header("webhook-id")).containsOnly(
                        receiver.requests("/capped").get(0).header("webhook-id"));
            }
        }
    }

    /** A new database with the table the parking tests change: items (id, n). */
    private static String itemsDatabase(PostgresServer pg, String prefix) throws Exception {
        String database = pg.createDatabase(prefix);
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE items (id int PRIMARY KEY, n int)");
        }
        return database;
    }

    /** The ids /down accepted for row 1's changes, in the order they arrived, each once. */
    private static List<String> acceptedChangesOfRow1(WebhookReceiver receiver, List<String> accepted) {
        return receiver.requests("/down").stream().filter(r -> accepted.contains(r.header("webhook-id"))
                && r.body().contains("\"new\":{\"id\":1,")).map(r -> r.header("webhook-id")).distinct().toList();
    }

    /** {@code POST /subscriptions/config:old/dead-letters/replay}. */
    private static java.net.http.HttpResponse<String> replayOld(WalhookProcess walhook) throws Exception {
        return java.net.http.HttpClient.newHttpClient().send(
                java.net.http.HttpRequest.newBuilder(walhook.uri("/subscriptions/config:old/dead-letters/replay"))
                        .header("Authorization", "Bearer t0ken").POST(java.net.http.HttpRequest.BodyPublishers.noBody()).build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
    }

    /** The "old" subscription's entry in /status. */
    private static JsonNode oldStatus(WalhookProcess walhook) throws Exception {
        String body = java.net.http.HttpClient.newHttpClient().send(java.net.http.HttpRequest.newBuilder(
                walhook.uri("/status")).header("Authorization", "Bearer t0ken").build(),
                java.net.http.HttpResponse.BodyHandlers.ofString()).body();
        for (JsonNode subscription : JSON.readTree(body).get("subscriptions")) {
            if (subscription.get("name").asText().equals("old")) {
                return subscription;
            }
        }
        throw new AssertionError("no subscription old in /status: " + body);
    }

    private static long parkedAttempts(PostgresServer pg, String database, String subscription) throws Exception {
        return number(pg, database, "SELECT max(attempts) FROM walhook.parked_event WHERE subscription = '" + subscription + "'");
    }

    private static long parked(PostgresServer pg, String database) throws Exception {
        return parked(pg, database, "down");
    }

    private static long parked(PostgresServer pg, String database, String subscription) throws Exception {
        return number(pg, database, "SELECT count(*) FROM walhook.parked_event WHERE subscription = '" + subscription + "'");
    }

    private static long number(PostgresServer pg, String database, String query) throws Exception {
        try (Connection c = pg.connect(database); Statement s = c.createStatement(); java.sql.ResultSet rs = s.executeQuery(query)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /** Whether the slot's confirmed position is past the commit whose id prefix (16 hex digits) is given. */
    private static boolean confirmedPast(PostgresServer pg, String database, String commitHex16) throws Exception {
        try (Connection c = pg.connect(database); Statement s = c.createStatement();
             java.sql.ResultSet rs = s.executeQuery("SELECT confirmed_flush_lsn::text FROM pg_replication_slots"
                     + " WHERE slot_name = '" + database + "'")) {
            rs.next();
            return io.walhook.pgoutput.Lsn.parse(rs.getString(1)).value() > Long.parseUnsignedLong(commitHex16, 16);
        }
    }

    @Test
    void batchesAreJsonArraysOrCloudEventsBatchesInCommitOrderWithStableIds() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("batching");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE readings (id int PRIMARY KEY, v int)");
        }
        try (WebhookReceiver receiver = WebhookReceiver.start();
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database,
                     "WALHOOK_SUBSCRIPTIONS_PLAIN_URL", receiver.url("/plain"),
                     "WALHOOK_SUBSCRIPTIONS_PLAIN_BATCH_MAX_EVENTS", "100",
                     "WALHOOK_SUBSCRIPTIONS_PLAIN_BATCH_MAX_WAIT_MS", "300",
                     "WALHOOK_SUBSCRIPTIONS_PLAIN_SECRET", SECRET,
                     "WALHOOK_SUBSCRIPTIONS_CE_URL", receiver.url("/ce"),
                     "WALHOOK_SUBSCRIPTIONS_CE_FORMAT", "cloudevents",
                     "WALHOOK_SUBSCRIPTIONS_CE_BATCH_MAX_EVENTS", "50",
                     "WALHOOK_SUBSCRIPTIONS_CE_BATCH_MAX_WAIT_MS", "300"))) {
            walhook.awaitReady(WAIT);
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute("INSERT INTO readings SELECT g, g * 10 FROM generate_series(1, 250) g");
            }
            await().atMost(WAIT).until(() -> count(receiver.requests("/plain")) == 250 && count(receiver.requests("/ce")) == 250);
            List<Integer> rows = new java.util.ArrayList<>();
            for (WebhookReceiver.Request request : receiver.requests("/plain")) {
                assertThat(request.header("content-type")).isEqualTo("application/json");
                JsonNode batch = JSON.readTree(request.body());
                assertThat(batch.isArray()).isTrue();
                assertThat(batch.size()).isBetween(1, 100);
                assertThat(request.header("webhook-id")).isEqualTo(WebhookReceiver.batchId(batch));
                assertThat(signatureVerifies(request)).isTrue();
                List<String> ids = new java.util.ArrayList<>();
                batch.forEach(e -> {
                    rows.add(e.at("/new/id").asInt());
                    ids.add(e.get("id").asText());
                });
                assertThat(ids).as("a batch is a run of its lane in commit order").isSorted();
            }
            assertThat(rows).containsExactlyInAnyOrderElementsOf(java.util.stream.IntStream.rangeClosed(1, 250).boxed().toList());
            for (WebhookReceiver.Request request : receiver.requests("/ce")) {
                assertThat(request.header("content-type")).isEqualTo("application/cloudevents-batch+json");
                JsonNode batch = JSON.readTree(request.body());
                assertThat(batch.size()).isBetween(1, 50);
                batch.forEach(e -> {
                    assertThat(e.get("specversion").asText()).isEqualTo("1.0");
                    assertThat(e.get("id").asText()).isEqualTo(e.at("/data/id").asText());
                });
            }

            // a lone change to a batching subscription is still an array: receivers see one shape
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute("INSERT INTO readings VALUES (251, 2510)");
            }
            await().atMost(WAIT).until(() -> count(receiver.requests("/plain")) == 251 && count(receiver.requests("/ce")) == 251);
            for (String path : List.of("/plain", "/ce")) {
                List<WebhookReceiver.Request> requests = receiver.requests(path);
                WebhookReceiver.Request lone = requests.get(requests.size() - 1);
                JsonNode batch = JSON.readTree(lone.body());
                assertThat(batch.isArray()).as(path + " got " + lone.body()).isTrue();
                assertThat(batch.size()).isEqualTo(1);
                assertThat(lone.header("webhook-id")).isEqualTo(WebhookReceiver.batchId(batch))
                        .startsWith(batch.get(0).get("id").asText() + "+1-");
                assertThat(lone.header("content-type")).isEqualTo(path.equals("/ce")
                        ? "application/cloudevents-batch+json" : "application/json");
            }
        }
    }

    /** Events received, counting each element of a batch. */
    private static int count(List<WebhookReceiver.Request> requests) {
        int events = 0;
        for (WebhookReceiver.Request request : requests) {
            events += request.body().startsWith("[") ? readArraySize(request.body()) : 1;
        }
        return events;
    }

    private static int readArraySize(String body) {
        try {
            return JSON.readTree(body).size();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
