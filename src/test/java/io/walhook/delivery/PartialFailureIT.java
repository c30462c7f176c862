package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static io.walhook.delivery.ItemsSetup.TOKEN;
import static io.walhook.delivery.ItemsSetup.env;
import static io.walhook.delivery.ItemsSetup.events;
import static io.walhook.delivery.ItemsSetup.itemsDatabase;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;

import io.walhook.testing.ApiClient;
import io.walhook.testing.DnsServer;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * Delivery under partial failure, from outside against the packaged jar: a row whose destination
 * rejects it, a request that hangs, a destination failing a third of requests under a backlog, and
 * what a subscription's identity keeps (rename, delete, recreate, another lane count).
 */
class PartialFailureIT {

    private static final Duration WAIT = Duration.ofSeconds(120);

    /** Records the events of accepted requests: each event's first acceptance, by row, in arrival order. */
    private static final class Accepted {
        final Set<String> ids = ConcurrentHashMap.newKeySet();
        final Map<Integer, List<Integer>> versions = new LinkedHashMap<>();

        synchronized void add(WebhookReceiver.Request request) {
            for (JsonNode event : events(request)) {
                if (ids.add(event.get("id").asText())) {
                    versions.computeIfAbsent(event.at("/new/id").asInt(), k -> new ArrayList<>()).add(event.at("/new/n").asInt());
                }
            }
        }

        synchronized int count(java.util.function.IntPredicate row) {
            return versions.entrySet().stream().filter(e -> row.test(e.getKey())).mapToInt(e -> e.getValue().size()).sum();
        }

        synchronized Map<Integer, List<Integer>> snapshot() {
            Map<Integer, List<Integer>> copy = new LinkedHashMap<>();
            versions.forEach((k, v) -> copy.put(k, List.copyOf(v)));
            return copy;
        }
    }

    private static boolean mentionsRow(WebhookReceiver.Request request, int row) {
        return request.body().contains("\"new\":{\"id\":" + row + ",");
    }

    @Test
    void aRowItsDestinationRejectsHoldsBackOnlyThatRow() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "poison");
        AtomicBoolean poisoned = new AtomicBoolean(true);
        Accepted accepted = new Accepted();
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (poisoned.get() && mentionsRow(request, 1)) {
                    return 422;
                }
                accepted.add(request);
                return 204;
            });
            try (WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_DELIVERY_MAX_BACKOFF", "1s",
                    "WALHOOK_SUBSCRIPTIONS_ROWS_URL", receiver.url("/rows"),
                    "WALHOOK_SUBSCRIPTIONS_ROWS_BATCH_MAX_EVENTS", "20"))) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                pg.execute(database, "INSERT INTO items VALUES (1, 0)");
                for (int n = 1; n <= 10; n++) {
                    pg.execute(database, "UPDATE items SET n = " + n + " WHERE id = 1");
                }
                pg.execute(database, "INSERT INTO items SELECT g, 0 FROM generate_series(2, 4000) g");
                // every other row arrives while row 1 is rejected, in whatever batches they travel
                await().atMost(WAIT).until(() -> accepted.count(row -> row != 1) == 3999);
                assertThat(accepted.snapshot()).doesNotContainKey(1);
                JsonNode status = api.status("rows");
                // row 1's request is retried: waiting for its next attempt, or under way again (a retry that came
                // due while every request slot was taken starts as the last of the others frees one)
                assertThat(status.get("retrying").asInt() + status.get("in_flight").asInt())
                        .as("row 1's request waits for its next attempt or is under way").isPositive();
                assertThat(status.get("mode").asText()).isEqualTo("direct");

                poisoned.set(false);
                await().atMost(WAIT).until(() -> accepted.count(row -> row == 1) == 11);
                assertThat(accepted.snapshot().get(1)).containsExactly(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
            }
        }
    }

    /**
     * An {@code ALTER TABLE ... REPLICA IDENTITY} between two changes of a row changes what they
     * are keyed by (under FULL every column is the key): the later change still waits for the
     * earlier one its destination refuses.
     */
    @Test
    void aRowsChangesStayInOrderAcrossAChangeOfItsTablesReplicaIdentity() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "rekeyed");
        AtomicBoolean poisoned = new AtomicBoolean(true);
        Accepted accepted = new Accepted();
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (poisoned.get() && request.body().contains("\"new\":{\"id\":1,\"n\":0}")) {
                    return 500;
                }
                accepted.add(request);
                return 204;
            });
            try (WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_DELIVERY_MAX_BACKOFF", "1s",
                    "WALHOOK_SUBSCRIPTIONS_ROWS_URL", receiver.url("/rows")))) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                pg.execute(database, "INSERT INTO items VALUES (1, 0)");
                await().atMost(WAIT).until(() -> receiver.requests().size() >= 2); // refused, and again
                pg.execute(database, "ALTER TABLE items REPLICA IDENTITY FULL");
                pg.execute(database, "UPDATE items SET n = 1 WHERE id = 1");
                pg.execute(database, "ALTER TABLE items REPLICA IDENTITY DEFAULT");
                pg.execute(database, "UPDATE items SET n = 2 WHERE id = 1");
                await().atMost(WAIT).until(() -> api.status("rows").get("held_back").asInt() == 2);
                int refused = receiver.requests().size();
                await().atMost(WAIT).until(() -> receiver.requests().size() >= refused + 2); // two more attempts meanwhile
                assertThat(accepted.snapshot()).as("nothing of row 1 overtakes its refused first change").isEmpty();

                poisoned.set(false);
                await().atMost(WAIT).until(() -> accepted.count(row -> row == 1) == 3);
                assertThat(accepted.snapshot().get(1)).containsExactly(0, 1, 2);
            }
        }
    }

    @Test
    void aRequestThatHangsHoldsBackOnlyItsRow() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "hang");
        CountDownLatch release = new CountDownLatch(1);
        Accepted accepted = new Accepted();
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (mentionsRow(request, 1) && release.getCount() > 0) {
                    try {
                        release.await(20, TimeUnit.SECONDS); // no answer meanwhile: walhook's timeout gives up first
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    accepted.add(request); // answered at last: walhook counts it if it was still waiting
                    return 204;
                }
                accepted.add(request);
                return 204;
            });
            try (WalhookProcess walhook = WalhookProcess.start(env(pg, database,
                    "WALHOOK_DELIVERY_REQUEST_TIMEOUT", "1s", "WALHOOK_DELIVERY_MAX_BACKOFF", "1s",
                    "WALHOOK_SUBSCRIPTIONS_ROWS_URL", receiver.url("/rows")))) {
                walhook.awaitReady(WAIT);
                pg.execute(database, "INSERT INTO items VALUES (1, 0)");
                pg.execute(database, "UPDATE items SET n = 1 WHERE id = 1");
                pg.execute(database, "INSERT INTO items SELECT g, 0 FROM generate_series(2, 500) g");
                await().atMost(WAIT).until(() -> accepted.count(row -> row != 1) == 499);
                await().atMost(WAIT).until(() -> walhook.output().contains("failed (no response within 1000 ms)"));
                assertThat(accepted.snapshot()).doesNotContainKey(1);
                release.countDown();
                try {
                    await().atMost(Duration.ofSeconds(30)).until(() -> accepted.count(row -> row == 1) == 2);
                } catch (org.awaitility.core.ConditionTimeoutException e) {
                    throw new AssertionError("row 1: " + receiver.requests().stream().filter(r -> mentionsRow(r, 1))
                            .map(r -> r.receivedAt() + " " + r.body()).toList() + "\nstatus: "
                            + new ApiClient(walhook, TOKEN).get("/status").text() + "\n" + walhook.output(), e);
                }
                assertThat(accepted.snapshot().get(1)).containsExactly(0, 1);
            }
        }
    }

    /**
     * A destination whose host name's lookups go unanswered (its DNS server down, say) must fail
     * alone. The lookups ran on the event loops every webhook request, API call and health check
     * shares: with the system's resolver waiting 30 s per try, every other subscription stalled
     * for as long. Here the lookups go to a server that takes queries and never answers, and the
     * other subscription gets its changes meanwhile: with Vert.x's own resolver, and with the
     * system's (as in the native executable), whose look-ups walhook then runs on threads of their own.
     */
    @org.junit.jupiter.params.ParameterizedTest(name = "QUARKUS_VERTX_USE_ASYNC_DNS={0}")
    @org.junit.jupiter.params.provider.ValueSource(strings = {"true", "false"})
    void aDestinationWhoseHostNameNeverResolvesDoesNotStallTheOthers(String asyncDns) throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(WalhookProcess.ownResolverPossible(),
                "walhook needs a mount namespace of its own (root) to be given a DNS server that never answers");
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "unresolved_" + asyncDns);
        java.nio.file.Path resolvConf = java.nio.file.Files.createTempFile("resolv", ".conf");
        // a loopback address of its own on the DNS port (a resolv.conf names no port), taking queries, answering none
        DnsServer bound;
        try {
            bound = DnsServer.silent(new java.net.InetSocketAddress(java.net.InetAddress.getByName("127.0.0.77"), 53));
        } catch (java.net.SocketException e) {
            java.nio.file.Files.delete(resolvConf);
            org.junit.jupiter.api.Assumptions.abort("cannot take port 53 of 127.0.0.77 for a DNS server that never answers: " + e);
            return;
        }
        try (DnsServer silent = bound) {
            java.nio.file.Files.writeString(resolvConf, "nameserver 127.0.0.77\noptions timeout:30 attempts:5\n");
            Accepted accepted = new Accepted();
            try (WebhookReceiver receiver = WebhookReceiver.start()) {
                receiver.respond(request -> {
                    accepted.add(request);
                    return 204;
                });
                int port = java.net.URI.create(receiver.url("/")).getPort();
                try (WalhookProcess walhook = WalhookProcess.startResolvingWith(resolvConf, env(pg, database,
                        "QUARKUS_VERTX_USE_ASYNC_DNS", asyncDns,
                        "WALHOOK_SUBSCRIPTIONS_LOST_URL", "http://receiver.walhook.invalid:" + port + "/lost",
                        "WALHOOK_SUBSCRIPTIONS_ROWS_URL", receiver.url("/rows")))) {
                    walhook.awaitReady(WAIT);
                    ApiClient api = new ApiClient(walhook, TOKEN);
                    pg.execute(database, "INSERT INTO items VALUES (1, 0)");
                    await().atMost(WAIT).until(() -> silent.queries() > 0); // the lost one's lookups are under way
                    for (int n = 1; n <= 20; n++) {
                        pg.execute(database, "UPDATE items SET n = " + n + " WHERE id = 1");
                    }
                    pg.execute(database, "INSERT INTO items SELECT g, 0 FROM generate_series(2, 200) g");
                    // far sooner than one lookup's tries take (30 s each)
                    await().atMost(Duration.ofSeconds(20)).until(() -> accepted.count(row -> true) == 220);
                    assertThat(accepted.snapshot().get(1)).as("row 1 in commit order").hasSize(21).isSorted();
                    assertThat(api.status("lost").get("delivered").asLong()).isZero();
                }
            }
        } finally {
            java.nio.file.Files.deleteIfExists(resolvConf);
        }
    }

    /**
     * A destination's name with several addresses, the first of which refuses connections (one
     * node of the receiver's down): every attempt went to that first address, and nothing was
     * delivered while the others were up. Connections now take its addresses in turn, so a retry
     * reaches another one.
     */
    @Test
    void aDestinationWhoseFirstAddressIsDownGetsEveryChangeThroughAnother() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse(Boolean.getBoolean("walhook.it.native"),
                "the test's DNS server is named through Vert.x's resolver (QUARKUS_VERTX_RESOLVER_SERVERS), which the"
                        + " native executable does not use; HostLookupsTest covers its addresses taken in turn");
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "addresses");
        Accepted accepted = new Accepted();
        try (WebhookReceiver receiver = WebhookReceiver.start();
             DnsServer dns = DnsServer.answering(Map.of("receiver.walhook.test", List.of(
                     java.net.InetAddress.getByName("127.0.0.2"), java.net.InetAddress.getByName("127.0.0.1"))))) {
            receiver.respond(request -> {
                accepted.add(request);
                return 204;
            });
            int port = java.net.URI.create(receiver.url("/")).getPort(); // the receiver takes 127.0.0.1 only
            try (WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_DELIVERY_MAX_BACKOFF", "1s",
                    "QUARKUS_VERTX_RESOLVER_SERVERS", dns.address(),
                    "WALHOOK_SUBSCRIPTIONS_ROWS_URL", "http://receiver.walhook.test:" + port + "/rows"))) {
                walhook.awaitReady(WAIT);
                pg.execute(database, "INSERT INTO items VALUES (1, 0)");
                for (int n = 1; n <= 10; n++) {
                    pg.execute(database, "UPDATE items SET n = " + n + " WHERE id = 1");
                }
                pg.execute(database, "INSERT INTO items SELECT g, 0 FROM generate_series(2, 50) g");
                await().atMost(WAIT).until(() -> accepted.count(row -> true) == 60);
                assertThat(accepted.snapshot().get(1)).containsExactly(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
                assertThat(dns.queries()).as("the name was looked up where the test said").isPositive();
            }
        }
    }

    @Test
    void aDestinationFailingAThirdOfRequestsGetsA100000RowBacklog() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "flaky");
        Random random = new Random(30);
        Accepted accepted = new Accepted();
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                synchronized (random) {
                    if (random.nextInt(10) < 3) {
                        return 500;
                    }
                }
                accepted.add(request);
                return 204;
            });
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_FLAKY_URL", receiver.url("/flaky"),
                    "WALHOOK_SUBSCRIPTIONS_FLAKY_BATCH_MAX_EVENTS", "200");
            // the backlog is in the slot before walhook reads it
            try (WalhookProcess first = WalhookProcess.start(env)) {
                first.awaitReady(WAIT);
                first.terminate();
                first.awaitExit(WAIT);
            }
            pg.execute(database, "INSERT INTO items SELECT g, 0 FROM generate_series(1, 100000) g");
            for (int n = 1; n <= 20; n++) {
                pg.execute(database, "UPDATE items SET n = " + n + " WHERE id <= 100");
            }
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                await().atMost(WAIT).until(() -> accepted.ids.size() == 102000);
                assertThat(accepted.snapshot()).hasSize(100000).allSatisfy((row, versions) -> assertThat(versions)
                        .as("row %d", row).isSorted().hasSize(row <= 100 ? 21 : 1));
                await().atMost(WAIT).until(() -> api.status("flaky").get("parked").asInt() == 0);
            }
        }
    }

    @Test
    void aSubscriptionsQueueBelongsToItsIdThroughARenameAndDiesWithIt() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "identity");
        AtomicBoolean down = new AtomicBoolean(true);
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> request.path().equals("/old") || down.get() ? 500 : 204);
            try (WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true",
                    "WALHOOK_DELIVERY_MAX_BACKOFF", "500ms"))) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                String body = "{\"name\": \"%s\", \"tables\": [\"public.items\"], \"retry\": {\"window_ms\": 500},"
                        + " \"destination\": {\"type\": \"webhook\", \"url\": \"%s\"}}";
                String id = api.create(body.formatted("tenant", receiver.url("/old")));
                await().atMost(WAIT).until(() -> api.status("tenant") != null);
                pg.execute(database, "INSERT INTO items SELECT g, 0 FROM generate_series(1, 20) g");
                await().atMost(WAIT).until(() -> api.status("tenant").get("parked").asInt() == 20);
                // one row's dead letters, by its key
                JsonNode row7 = api.get("/subscriptions/" + id + "/dead-letters?key=" + java.net.URLEncoder.encode(
                        "{\"id\": 7}", java.nio.charset.StandardCharsets.UTF_8)).body();
                assertThat(row7.get("items")).singleElement().satisfies(item -> {
                    assertThat(item.at("/key/id").asInt()).isEqualTo(7);
                    assertThat(item.at("/event/new/id").asInt()).isEqualTo(7);
                });

                // renamed, with a new URL: the same queue is delivered there, and nothing more to the old URL
                down.set(false);
                assertThat(api.put("/subscriptions/" + id, body.formatted("renamed", receiver.url("/new"))).status())
                        .isEqualTo(200);
                await().atMost(WAIT).until(() -> receiver.requests("/new").stream().map(r -> r.header("webhook-id"))
                        .distinct().count() == 20);
                await().atMost(WAIT).until(() -> api.status("renamed").get("parked").asInt() == 0);
                // the receiver records a request before it answers: the count follows the answer
                await().atMost(WAIT).until(() -> api.status("renamed").get("delivered").asInt() == 20);
                assertThat(api.status("renamed").get("id").asText()).isEqualTo(id);

                // deleted while its destination fails: the response says how many queued events went with it
                down.set(true);
                pg.execute(database, "UPDATE items SET n = 1 WHERE id <= 5");
                await().atMost(WAIT).until(() -> api.status("renamed").get("parked").asInt() == 5);
                ApiClient.Answer deleted = api.delete("/subscriptions/" + id);
                assertThat(deleted.status()).isEqualTo(200);
                assertThat(deleted.body().get("discarded_events").asInt()).isEqualTo(5);

                // a new subscription under the old name starts empty
                down.set(false);
                String again = api.create(body.formatted("renamed", receiver.url("/again")));
                await().atMost(WAIT).until(() -> api.status("renamed") != null
                        && api.status("renamed").get("id").asText().equals(again));
                assertThat(api.get("/subscriptions/" + again + "/dead-letters").body().get("items")).isEmpty();
                pg.execute(database, "INSERT INTO items VALUES (100, 0)");
                try {
                    await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/again").size() == 1);
                } catch (org.awaitility.core.ConditionTimeoutException e) {
                    throw new AssertionError("status: " + api.get("/status").text() + "\n" + walhook.threadDump(), e);
                }
                assertThat(receiver.requests("/again").get(0).body()).contains("\"new\":{\"id\":100,");
                await().atMost(WAIT).until(() -> api.status("renamed").get("delivered").asInt() == 1);
            }
        }
    }

    @Test
    void anotherLaneCountKeepsEachRowsQueuedAndLiveChangesInOrder() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "lanes");
        AtomicBoolean down = new AtomicBoolean(true);
        Accepted accepted = new Accepted();
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (down.get()) {
                    return 500;
                }
                accepted.add(request);
                return 204;
            });
            Map<String, String> env = env(pg, database, "WALHOOK_DELIVERY_RETRY_WINDOW", "500ms",
                    "WALHOOK_DELIVERY_MAX_BACKOFF", "500ms", "WALHOOK_SUBSCRIPTIONS_MIRROR_URL", receiver.url("/m"));
            Map<String, String> four = new java.util.HashMap<>(env);
            four.put("WALHOOK_DELIVERY_CONCURRENCY", "4");
            try (WalhookProcess walhook = WalhookProcess.start(four)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                pg.execute(database, "INSERT INTO items SELECT g, 0 FROM generate_series(1, 8) g");
                for (int n = 1; n <= 5; n++) {
                    pg.execute(database, "UPDATE items SET n = " + n);
                }
                await().atMost(WAIT).until(() -> api.status("mirror").get("parked").asInt() == 48);
                walhook.terminate();
                walhook.awaitExit(WAIT);
            }
            // three lanes now, the destination back, and the rows change again at once
            down.set(false);
            Map<String, String> three = new java.util.HashMap<>(env);
            three.put("WALHOOK_DELIVERY_CONCURRENCY", "3");
            try (WalhookProcess walhook = WalhookProcess.start(three)) {
                walhook.awaitReady(WAIT);
                for (int n = 6; n <= 10; n++) {
                    pg.execute(database, "UPDATE items SET n = " + n);
                }
                await().atMost(WAIT).until(() -> accepted.ids.size() == 88);
                assertThat(accepted.snapshot()).hasSize(8).allSatisfy((row, versions) -> assertThat(versions)
                        .as("row %d", row).containsExactly(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
            }
        }
    }
}
