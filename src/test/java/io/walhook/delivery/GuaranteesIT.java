package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static io.walhook.delivery.ItemsSetup.TOKEN;
import static io.walhook.delivery.ItemsSetup.env;
import static io.walhook.delivery.ItemsSetup.events;
import static io.walhook.delivery.ItemsSetup.itemsDatabase;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.AmqpPeer;
import io.walhook.testing.AmqpReceiver;
import io.walhook.testing.ApiClient;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * Guarantees that broke under a second fault, each provoked from outside against the packaged
 * jar: a PUT while a batch fills, a Retry-After too large to count, a name that resolves to the
 * local network at delivery time, an AMQP reject in the middle of a row's changes, and a crash
 * while batches are cut.
 */
class GuaranteesIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final ObjectMapper JSON = new ObjectMapper();

    private static Set<String> ids(List<WebhookReceiver.Request> requests) {
        Set<String> ids = new java.util.HashSet<>();
        requests.forEach(r -> events(r).forEach(e -> ids.add(e.get("id").asText())));
        return ids;
    }

    @Test
    void aWriteThroughTheApiAppliesToEveryChangeCommittedAfterItsAnswer() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "applied");
        int tenants = 20;
        try (WebhookReceiver receiver = WebhookReceiver.start();
             WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            String subscription = "{\"name\": \"t%d\", \"tables\": [\"public.items\"], \"filter\": \"new.n == %d\","
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/t%d") + "\"}}";
            List<String> ids = new ArrayList<>();
            for (int t = 0; t < tenants; t++) {
                // a tenant registers its endpoint, and its first change is committed the moment the API answered
                ids.add(api.create(subscription.formatted(t, t, t)));
                pg.execute(database, "INSERT INTO items VALUES (" + t + ", " + t + ")");
            }
            // (what a pause or a delete finds not yet sent waits, or goes, with what follows: the changes before them
            // are awaited first)
            for (int t = 0; t < 2; t++) {
                int tenant = t;
                await().atMost(WAIT).until(() -> !receiver.requests("/t" + tenant).isEmpty());
            }
            // paused: what is committed after the answer waits; deleted: it is not sent; replaced: the new filter
            assertThat(api.post("/subscriptions/" + ids.get(0) + "/pause", "").status()).isEqualTo(200);
            pg.execute(database, "INSERT INTO items VALUES (100, 0)");
            assertThat(api.delete("/subscriptions/" + ids.get(1)).status()).isEqualTo(200);
            pg.execute(database, "INSERT INTO items VALUES (101, 1)");
            assertThat(api.put("/subscriptions/" + ids.get(2), subscription.formatted(2, 200, 2)).status()).isEqualTo(200);
            pg.execute(database, "INSERT INTO items VALUES (102, 2)", "INSERT INTO items VALUES (103, 200)");
            await().atMost(WAIT).until(() -> receiver.requests("/t2").size() >= 2);
            for (int t = 0; t < tenants; t++) {
                int tenant = t;
                await().atMost(WAIT).untilAsserted(() -> assertThat(receiver.requests("/t" + tenant))
                        .as("tenant " + tenant + "'s first change").isNotEmpty());
            }
            assertThat(receiver.requests("/t0")).as("paused").hasSize(1);
            assertThat(receiver.requests("/t1")).as("deleted").hasSize(1);
            assertThat(receiver.requests("/t2").stream().flatMap(r -> events(r).stream())
                    .map(e -> e.get("new").get("id").asInt())).as("the replaced filter").containsExactly(2, 103);
            assertThat(api.post("/subscriptions/" + ids.get(0) + "/resume", "").status()).isEqualTo(200);
            await().atMost(WAIT).until(() -> receiver.requests("/t0").size() == 2);
        }
    }

    /**
     * What the API answered is durable, whatever the server's synchronous_commit: a crash that loses
     * the commits the server held in memory does not lose a subscription created, edited or paused,
     * or a backfill started (each was gone after it, though answered 201, 200 or 202).
     */
    @Test
    void whatTheApiAnsweredSurvivesACrashThatLosesUnflushedCommits() throws Exception {
        io.walhook.testing.EmbeddedPostgres pg = io.walhook.testing.EmbeddedPostgres.builder()
                .major(TestPostgres.defaultMajor()).unflushedCommits().start();
        try {
            String database = pg.createDatabase("durable_api");
            pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)", "CHECKPOINT");
            try (WebhookReceiver receiver = WebhookReceiver.start();
                 WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_ALLOW_PRIVATE_DESTINATIONS",
                         "true"))) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                String subscription = "{\"name\": \"%s\", \"tables\": [\"public.items\"], \"filter\": \"%s\","
                        + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/d") + "\"}}";
                String edited = api.create(subscription.formatted("edited", "new.n > 0"));
                // a dead letter, durable, and the slot's position past its change durable too (no replay parks it again)
                receiver.respond(request -> request.path().startsWith("/failing") ? 500 : 204);
                String failing = api.create("{\"name\": \"failing\", \"tables\": [\"public.items\"], \"retry\":"
                        + " {\"max_attempts\": 1}, \"destination\": {\"type\": \"webhook\", \"url\": \""
                        + receiver.url("/failing") + "\"}}");
                await().atMost(WAIT).until(() -> api.status("failing") != null);
                pg.execute(database, "INSERT INTO items VALUES (1, 0)");
                await().atMost(WAIT).until(() -> api.get("/subscriptions/" + failing + "/dead-letters").body()
                        .get("items").size() == 1);
                String written = valueOf(pg, database, "pg_current_wal_lsn()");
                await().atMost(WAIT).until(() -> valueOf(pg, database,
                        "(SELECT confirmed_flush_lsn FROM pg_replication_slots) >= '" + written + "'::pg_lsn").equals("true"));
                pg.execute(database, "CHECKPOINT");
                pg.holdWalWriter();

                String created = api.create(subscription.formatted("created", "new.n > 1"));
                assertThat(api.put("/subscriptions/" + edited, subscription.formatted("edited", "new.n > 2")).status())
                        .isEqualTo(200);
                assertThat(api.post("/subscriptions/" + edited + "/pause", "").status()).isEqualTo(200);
                ApiClient.Answer backfill = api.post("/subscriptions/" + created + "/backfills", "{}");
                assertThat(backfill.status()).as(backfill.text()).isEqualTo(202);
                // last: a durable write after it would flush it with its own
                assertThat(api.delete("/subscriptions/" + failing + "/dead-letters").body().get("deleted").asInt())
                        .isEqualTo(1);
                pg.crashLosingUnflushedCommits();

                await().atMost(WAIT).ignoreExceptions()
                        .until(() -> api.get("/subscriptions/" + edited).status() == 200);
                assertThat(api.get("/subscriptions/" + created).status()).as("created").isEqualTo(200);
                JsonNode after = api.get("/subscriptions/" + edited).body();
                assertThat(after.get("filter").asText()).as("edited").isEqualTo("new.n > 2");
                assertThat(after.get("paused").asBoolean()).as("paused").isTrue();
                assertThat(api.get("/subscriptions/" + failing + "/dead-letters").body().get("items")).as("dropped")
                        .isEmpty();
                assertThat(api.get("/subscriptions/" + created + "/backfills/" + backfill.body().get("id").asText())
                        .status()).as("backfill").isEqualTo(200);
            }
        } finally {
            pg.stop();
        }
    }

    /**
     * A dead letter dropped through the API stays dropped across a crash. The slot's acknowledged
     * position was still before its change (another subscription retrying the same transaction), so
     * the restarted walhook read the change from the slot again and queued it again, to be sent on
     * resume as if it had never been dropped.
     */
    @Test
    void aDroppedDeadLetterIsNeitherQueuedNorSentAgainAfterACrash() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "dropped");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> request.path().startsWith("/pinning") ? 503 : 204);
            Map<String, String> env = env(pg, database, "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true",
                    "WALHOOK_SUBSCRIPTIONS_PINNING_URL", receiver.url("/pinning"));
            String kept;
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                kept = api.create("{\"name\": \"kept\", \"tables\": [\"public.items\"], \"destination\":"
                        + " {\"type\": \"webhook\", \"url\": \"" + receiver.url("/kept") + "\"}}");
                assertThat(api.post("/subscriptions/" + kept + "/pause", "").status()).isEqualTo(200);
                pg.execute(database, "INSERT INTO items VALUES (1, 0)");
                await().atMost(WAIT).until(() -> api.get("/subscriptions/" + kept + "/dead-letters").body()
                        .get("items").size() == 1);
                await().atMost(WAIT).until(() -> receiver.requests("/pinning").size() >= 2); // retrying: the slot waits
                assertThat(api.delete("/subscriptions/" + kept + "/dead-letters").body().get("deleted").asInt()).isEqualTo(1);
            } // SIGKILL
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                int before = receiver.requests("/pinning").size();
                await().atMost(WAIT).until(() -> receiver.requests("/pinning").size() > before); // the change read again
                assertThat(api.get("/subscriptions/" + kept + "/dead-letters").body().get("items")).as("dropped").isEmpty();
                assertThat(api.post("/subscriptions/" + kept + "/resume", "").status()).isEqualTo(200);
                pg.execute(database, "INSERT INTO items VALUES (2, 0)");
                await().atMost(WAIT).until(() -> !receiver.requests("/kept").isEmpty());
                List<Integer> rows = new ArrayList<>();
                receiver.requests("/kept").forEach(r -> events(r).forEach(e -> rows.add(e.at("/new/id").asInt())));
                assertThat(rows).as("the dropped change is not sent").containsExactly(2);
                assertThat(api.get("/subscriptions/" + kept + "/dead-letters").body().get("items")).isEmpty();
            }
        }
    }

    /**
     * A subscription narrowed while its destination fails, and walhook killed before the events
     * routed under its old filter reached its durable queue: the slot sends them again after the
     * restart, and they are routed as the subscription matched when they committed. Routed under
     * the new filter, they matched nothing and were acknowledged unsent: lost.
     */
    @Test
    void aChangeRetriedWhenItsSubscriptionIsNarrowedSurvivesAKillBeforeItIsQueued() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "narrow_kill");
        AtomicBoolean down = new AtomicBoolean(true);
        List<JsonNode> accepted = new java.util.concurrent.CopyOnWriteArrayList<>();
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (down.get()) {
                    return 503;
                }
                accepted.addAll(events(request));
                return 204;
            });
            Map<String, String> env = env(pg, database, "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true");
            String body = "{\"name\": \"narrowed\", \"tables\": [\"public.items\"], \"filter\": \"%s\","
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/d") + "\"}}";
            try (WalhookProcess first = WalhookProcess.start(env)) {
                first.awaitReady(WAIT);
                ApiClient api = new ApiClient(first, TOKEN);
                String id = api.create(body.formatted("new.n > 0"));
                await().atMost(WAIT).until(() -> api.status("narrowed") != null);
                pg.execute(database, "INSERT INTO items VALUES (1, 1)");
                // refused, and tried again: in memory, unacknowledged
                await().atMost(WAIT).until(() -> receiver.requests().size() >= 2);
                try (java.sql.Connection locker = pg.connect(database); java.sql.Statement s = locker.createStatement()) {
                    locker.setAutoCommit(false);
                    // the durable queue held: what the narrowing writes there waits
                    s.execute("LOCK TABLE walhook.parked_event IN ACCESS EXCLUSIVE MODE");
                    assertThat(api.put("/subscriptions/" + id, body.formatted("new.n > 5")).status()).isEqualTo(200);
                    first.close(); // SIGKILL
                    locker.rollback();
                }
            }
            down.set(false);
            try (WalhookProcess second = WalhookProcess.start(env)) {
                second.awaitReady(WAIT);
                await().atMost(WAIT).until(() -> accepted.stream().anyMatch(e -> e.at("/new/id").asInt() == 1));
                pg.execute(database, "INSERT INTO items VALUES (2, 2), (3, 6)");
                await().atMost(WAIT).until(() -> accepted.stream().anyMatch(e -> e.at("/new/id").asInt() == 3));
                assertThat(accepted.stream().map(e -> e.at("/new/id").asInt()).distinct().toList())
                        .as("the new filter applies to what committed after the edit").containsExactly(1, 3);
            }
        }
    }

    /** The value of one SQL expression, as text. */
    private static String valueOf(PostgresServer pg, String database, String expression) throws Exception {
        try (java.sql.Connection c = pg.connect(database); java.sql.Statement s = c.createStatement();
             java.sql.ResultSet rs = s.executeQuery("SELECT (" + expression + ")::text")) {
            rs.next();
            return String.valueOf(rs.getString(1));
        }
    }

    @Test
    void loweringTheBatchSizeWhileABatchFillsDeliversEveryEvent() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "shrink");
        try (WebhookReceiver receiver = WebhookReceiver.start();
             WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            String subscription = "{\"name\": \"batched\", \"tables\": [\"public.items\"], \"batch\": {\"max_events\": %d,"
                    + " \"max_wait_ms\": 10000}, \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/b")
                    + "\"}}";
            String id = api.create(subscription.formatted(50));
            await().atMost(WAIT).until(() -> api.status("batched") != null);
            // 30 events wait for a batch of 50 to fill (for up to 10 s) ...
            pg.execute(database, "INSERT INTO items SELECT g, 0 FROM generate_series(1, 30) g");
            Thread.sleep(1000); // pacing: the 30 are routed and wait for their batch to fill
            // ... when the batch size drops to 1, and one more event comes under the new size
            assertThat(api.put("/subscriptions/" + id, subscription.formatted(1)).status()).isEqualTo(200);
            await().atMost(WAIT).until(() -> walhook.output().contains("subscriptions: [batched]")
                    && walhook.output().split("subscriptions: \\[batched]", -1).length > 2);
            pg.execute(database, "INSERT INTO items VALUES (31, 0)");
            await().atMost(WAIT).until(() -> ids(receiver.requests("/b")).size() == 31);
        }
    }

    @Test
    void aRetryAfterTooLargeToCountHoldsBackNeitherItsRowsNorOtherSubscriptions() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "retryafter");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> request.path().equals("/stuck") ? 503 : 204);
            receiver.respondHeaders(request -> request.path().equals("/stuck")
                    ? Map.of("Retry-After", "99999999999999999") : Map.of());
            try (WalhookProcess walhook = WalhookProcess.start(env(pg, database,
                    "WALHOOK_DELIVERY_RETRY_WINDOW", "30m",
                    "WALHOOK_SUBSCRIPTIONS_STUCK_URL", receiver.url("/stuck"),
                    "WALHOOK_SUBSCRIPTIONS_FINE_URL", receiver.url("/fine"),
                    "WALHOOK_SUBSCRIPTIONS_FINE_BATCH_MAX_EVENTS", "200"))) {
                walhook.awaitReady(WAIT);
                pg.execute(database, "INSERT INTO items SELECT g, 0 FROM generate_series(1, 12000) g");
                // more than the failing subscription's lanes and budget could ever hold: it must not stop the other
                await().atMost(WAIT).until(() -> ids(receiver.requests("/fine")).size() == 12000);
                assertThat(walhook.output()).doesNotContain("ArithmeticException").doesNotContain("internal error");
            }
        }
    }

    @Test
    void aDestinationThatResolvesToTheLocalNetworkAtDeliveryIsNotCalledNorTestFired() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "rebind");
        try (WebhookReceiver receiver = WebhookReceiver.start();
             WalhookProcess walhook = WalhookProcess.start(env(pg, database))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            // written when its name resolved to a public address; now it resolves to loopback (DNS rebinding)
            String id = java.util.UUID.randomUUID().toString();
            pg.execute(database, "INSERT INTO walhook.subscription (id, name, body) VALUES ('" + id + "', 'rebound',"
                    + " '{\"name\": \"rebound\", \"tables\": [\"public.items\"], \"destination\": {\"type\": \"webhook\","
                    + " \"url\": \"" + receiver.url("/rebound") + "\"}}')",
                    "SELECT pg_notify('" + io.walhook.routing.SubscriptionStore.CHANNEL + "', '')"); // as the API's writes do
            await().atMost(WAIT).until(() -> api.status("rebound") != null);
            pg.execute(database, "INSERT INTO items VALUES (1, 0)");
            await().atMost(WAIT).until(() -> {
                JsonNode status = api.status("rebound");
                return status.get("last_error").asText("").contains("loopback");
            });
            ApiClient.Answer fired = api.post("/subscriptions/" + id + "/test", null);
            assertThat(fired.status()).isEqualTo(200);
            assertThat(fired.body().get("delivered").asBoolean()).isFalse();
            assertThat(fired.body().get("error").asText()).contains("loopback");
            assertThat(receiver.requests()).as("nothing reached the local address").isEmpty();
        }
    }

    @Test
    void anAmqpRejectInTheMiddleOfARowsChangesKeepsThemInOrder() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "amqpreject");
        try (AmqpPeer peer = AmqpPeer.start();
             WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_AMQP_URL", peer.url(),
                     "WALHOOK_SUBSCRIPTIONS_Q_AMQP_ADDRESS", "items", "WALHOOK_SUBSCRIPTIONS_Q_TABLES", "public.items"))) {
            walhook.awaitReady(WAIT);
            // the first delivery of the row's second version is rejected, once
            AtomicBoolean rejected = new AtomicBoolean();
            peer.reject(message -> AmqpReceiver.body(message).contains("\"new\":{\"id\":1,\"n\":1}")
                    && rejected.compareAndSet(false, true));
            List<String> statements = new ArrayList<>(List.of("BEGIN", "INSERT INTO items VALUES (1, 0)"));
            for (int n = 1; n <= 20; n++) {
                statements.add("UPDATE items SET n = " + n + " WHERE id = 1");
            }
            statements.add("COMMIT");
            pg.execute(database, statements.toArray(String[]::new));
            await().atMost(WAIT).until(() -> peer.accepted().stream().map(m -> m.getMessageId()).distinct().count() == 21);
            assertThat(rejected).isTrue();
            List<Integer> firstAccepted = new ArrayList<>();
            Set<Object> seen = new java.util.HashSet<>();
            for (var message : peer.accepted()) {
                if (seen.add(message.getMessageId())) {
                    firstAccepted.add(JSON.readTree(AmqpReceiver.body(message)).at("/new/n").asInt());
                }
            }
            assertThat(firstAccepted).as("the row's changes, each first accepted in commit order").isSorted().hasSize(21);
        }
    }

    @Test
    void aRedeliveredEventKeepsItsIdWhateverBatchCarriesIt() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = itemsDatabase(pg, "rebatch");
        Map<String, Set<String>> changeOfId = new ConcurrentHashMap<>();
        Map<String, Set<String>> idsOfChange = new ConcurrentHashMap<>();
        Set<String> batchIds = ConcurrentHashMap.newKeySet();
        try (WebhookReceiver receiver = WebhookReceiver.start(request -> {
            batchIds.add(request.header("webhook-id"));
            for (JsonNode event : events(request)) {
                String change = event.at("/new/id").asInt() + "@" + event.at("/new/n").asInt();
                changeOfId.computeIfAbsent(event.get("id").asText(), k -> ConcurrentHashMap.newKeySet()).add(change);
                idsOfChange.computeIfAbsent(change, k -> ConcurrentHashMap.newKeySet()).add(event.get("id").asText());
            }
        })) {
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                    "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "25");
            Thread writer = new Thread(() -> {
                try {
                    for (int tx = 0; tx < 300; tx++) {
                        pg.execute(database, "INSERT INTO items SELECT g, " + tx + " FROM generate_series(" + (tx * 10 + 1)
                                + ", " + (tx * 10 + 10) + ") g");
                    }
                } catch (java.sql.SQLException e) {
                    throw new IllegalStateException(e);
                }
            }, "writer");
            WalhookProcess first = WalhookProcess.start(env);
            first.awaitReady(WAIT);
            writer.start();
            await().atMost(WAIT).until(() -> idsOfChange.size() >= 800);
            first.close(); // kill -9 while batches are under way
            try (WalhookProcess second = WalhookProcess.start(env)) {
                second.awaitReady(WAIT);
                writer.join(WAIT.toMillis());
                await().atMost(WAIT).until(() -> idsOfChange.size() == 3000);
            }
        }
        // a receiver deduplicating by each event's id applies every change once
        assertThat(changeOfId.values()).allSatisfy(changes -> assertThat(changes).hasSize(1));
        assertThat(idsOfChange.values()).allSatisfy(ids -> assertThat(ids).hasSize(1));
    }
}
