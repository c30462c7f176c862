package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;

import io.walhook.config.WalhookConfig;
import io.walhook.routing.EventEncoder;
import io.walhook.routing.Subscription;
import io.walhook.routing.SubscriptionConfigReader;
import io.walhook.routing.SubscriptionRegistry;
import io.walhook.routing.SubscriptionStore;
import io.walhook.source.SourceFixture;
import io.walhook.testing.TestPostgres;

/** Routing on a live stream: each subscription gets exactly its changes; stored ones apply live. */
class RoutingLiveTest {

    private static final Duration WAIT = Duration.ofSeconds(60);

    /** What a sender was handed, by subscription. */
    record Sent(String subscription, JsonNode event) {
    }

    private static WalhookConfig.SubscriptionConfig subscription(String tables, String operations, String filter) {
        Map<String, String> values = new java.util.HashMap<>(Map.of("URL", "http://127.0.0.1:9/hook", "TABLES", tables,
                "OPERATIONS", operations));
        if (filter != null) {
            values.put("FILTER", filter);
        }
        return io.walhook.routing.TestSubscriptions.config(values);
    }

    private static List<String> summary(List<Sent> sent, String subscription) {
        return sent.stream().filter(s -> s.subscription().equals(subscription))
                .map(s -> s.event().get("op").asText() + " " + s.event().get("table").asText() + " "
                        + (s.event().get("new").isNull() ? s.event().get("key") : s.event().get("new")).get("id"))
                .toList();
    }

    @Test
    void eachSubscriptionGetsExactlyItsChangesAndStoredOnesApplyFromTheNextTransaction() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "routing_live")) {
            source.sql("CREATE TABLE orders (id int PRIMARY KEY, status text, amount numeric)",
                    "CREATE TABLE customers (id int PRIMARY KEY, name text)");
            source.prepare("*");
            List<Subscription> configured = List.of(
                    SubscriptionConfigReader.read("big", subscription("public.orders", "insert,update",
                            "new.amount > 100"), false),
                    SubscriptionConfigReader.read("gone", subscription("public.*", "delete", null), false));
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            SubscriptionRegistry registry = new SubscriptionRegistry(configured, store);
            registry.refresh();
            List<Sent> sent = new CopyOnWriteArrayList<>();
            Map<String, Integer> routed = new java.util.concurrent.ConcurrentHashMap<>();
            EventEncoder encoder = new EventEncoder("/walhook/test", Map.of());
            io.walhook.source.ReplicationReader reader = source.startReader(r -> new RoutingLoop(r.events(), r.tracker(), registry, encoder,
                    (subscription, event, body, done) -> {
                        try {
                            sent.add(new Sent(subscription.name(), SourceFixture.JSON.readTree(body.body())));
                        } catch (java.io.IOException e) {
                            throw new IllegalStateException(e);
                        }
                        done.run();
                    }, new DeliveryMetrics() {
                        @Override
                        public void routed(io.walhook.routing.Subscription subscription, int events) {
                            routed.merge(subscription.name(), events, Integer::sum);
                        }
                    }));
            source.sql("INSERT INTO orders VALUES (1, 'new', 50), (2, 'new', 150)",
                    "UPDATE orders SET amount = 200 WHERE id = 1",
                    "INSERT INTO customers VALUES (1, 'ada')",
                    "DELETE FROM orders WHERE id = 2",
                    "DELETE FROM customers WHERE id = 1",
                    "INSERT INTO customers VALUES (2, 'before')");
            await().atMost(WAIT).until(() -> sent.size() == 4);

            store.insert(SourceFixture.JSON.readTree("{\"name\": \"people\", \"tables\": [\"public.customers\"],"
                    + " \"operations\": [\"insert\"], \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:9/p\"}}"));
            registry.refresh();
            source.sql("INSERT INTO customers VALUES (3, 'after')");
            await().atMost(WAIT).until(() -> sent.size() == 5);

            assertThat(summary(sent, "big")).containsExactly("insert orders 2", "update orders 1");
            assertThat(summary(sent, "gone")).containsExactly("delete orders 2", "delete customers 1");
            assertThat(summary(sent, "people")).containsExactly("insert customers 3");
            // the routed metric counts every copy handed to a sender, reported per chunk of events
            await().atMost(WAIT).untilAsserted(() -> assertThat(routed).containsExactlyInAnyOrderEntriesOf(
                    Map.of("big", 2, "gone", 2, "people", 1)));
            // the copy each got is the same event, with the same stable id
            assertThat(sent.stream().filter(s -> s.subscription().equals("big")).findFirst().orElseThrow()
                    .event().get("id").asText()).endsWith("-0002");
            // every copy was reported delivered: the acknowledged position passes the last transaction
            io.walhook.pgoutput.Lsn last = io.walhook.pgoutput.Lsn.parse(sent.get(4).event().at("/tx/commit_lsn").asText());
            await().atMost(WAIT).until(() -> reader.status().acknowledged().compareTo(last) > 0);
        }
    }

    /**
     * What a backfill must save before a change is acknowledged (a row an update moved out of its
     * reach) holds the change's transaction: the acknowledged position stays before it, later
     * transactions routed meanwhile, until the hold is let go.
     */
    @Test
    void aTransactionHeldWhileObservedIsAcknowledgedOnlyOnceLetGo() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "routing_hold")) {
            source.sql("CREATE TABLE items (id int PRIMARY KEY)", "INSERT INTO items VALUES (1)");
            source.prepare("*");
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(), new SubscriptionStore(source.dataSource, "walhook"));
            registry.refresh();
            List<Runnable> holds = new CopyOnWriteArrayList<>();
            List<String> observed = new CopyOnWriteArrayList<>();
            io.walhook.source.ReplicationReader reader = source.startReader(r -> new RoutingLoop(r.events(), r.tracker(),
                    registry, new EventEncoder("/walhook/test", Map.of()), (subscription, event, body, done) -> done.run(),
                    DeliveryMetrics.NONE, (event, reads) -> {
                        if (event.op() == io.walhook.change.Operation.UPDATE) {
                            holds.add(reads.hold());
                        }
                        observed.add(event.op().name());
                        return false;
                    }));
            io.walhook.pgoutput.Lsn beforeUpdate = io.walhook.pgoutput.Lsn.parse(source.queryOne("SELECT pg_current_wal_lsn()::text"));
            source.sql("UPDATE items SET id = 2 WHERE id = 1", "INSERT INTO items VALUES (3)");
            await().atMost(WAIT).until(() -> observed.contains("INSERT") && observed.contains("UPDATE"));
            assertThat(holds).hasSize(1);
            assertThat(reader.tracker().settled()).as("the held transaction is outstanding").isFalse();
            assertThat(reader.tracker().watermark()).isLessThanOrEqualTo(beforeUpdate);

            holds.get(0).run();
            await().atMost(WAIT).until(() -> reader.tracker().watermark().compareTo(beforeUpdate) > 0
                    && reader.tracker().settled());
        }
    }

    /** A routing loop over {@code registry} whose sender records what it is handed (and {@code handed}, each subscription). */
    private static RoutingLoop recording(io.walhook.source.ReplicationReader r, SubscriptionRegistry registry, List<Sent> sent,
            List<Subscription> handed) {
        return new RoutingLoop(r.events(), r.tracker(), registry, new EventEncoder("/walhook/test", Map.of()),
                (subscription, event, body, done) -> {
                    try {
                        sent.add(new Sent(subscription.name(), SourceFixture.JSON.readTree(body.body())));
                    } catch (java.io.IOException e) {
                        throw new IllegalStateException(e);
                    }
                    handed.add(subscription);
                    done.run();
                }, DeliveryMetrics.NONE);
    }

    /** The subscription's body for these tests, with this filter. */
    private static final String ORDERS = "{\"name\": \"orders\", \"tables\": [\"public.orders\"], \"filter\": \"%s\","
            + " \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:9/o\"}}";

    /**
     * A change committed before an edit of a subscription's filter, routed after it (the stream
     * behind, or sent again after a crash: here the reader starts after the edit), goes where the
     * subscription matched when it committed. It was routed under the new filter: a narrowing lost
     * it, though it was committed, and unacknowledged, before the edit.
     */
    @Test
    void aChangeCommittedBeforeAnEditIsRoutedAsTheSubscriptionMatchedWhenItCommitted() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "routing_then")) {
            source.sql("CREATE TABLE orders (id int PRIMARY KEY, amount numeric)");
            source.prepare("*");
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            String body = ORDERS;
            java.util.UUID id = store.insert(SourceFixture.JSON.readTree(body.formatted("new.amount > 100")));
            source.sql("INSERT INTO orders VALUES (1, 150)", "INSERT INTO orders VALUES (2, 50)");
            assertThat(store.replace(id, SourceFixture.JSON.readTree(body.formatted("new.amount < 100")))).isTrue();
            // an edit of anything else keeps no earlier matching
            assertThat(store.replace(id, SourceFixture.JSON.readTree(body.formatted("new.amount < 100")
                    .replace("/o\"", "/other\"")))).isTrue();
            // its creation is kept too: before it, the subscription matched nothing
            assertThat(store.matchedBefore()).extracting(SubscriptionStore.MatchedBefore::created).containsExactly(true, false);
            source.sql("INSERT INTO orders VALUES (3, 150)", "INSERT INTO orders VALUES (4, 50)");
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(), store);
            registry.refresh();
            List<Sent> sent = new CopyOnWriteArrayList<>();
            List<Subscription> handed = new CopyOnWriteArrayList<>();
            io.walhook.source.ReplicationReader reader = source.startReader(r -> recording(r, registry, sent, handed));
            await().atMost(WAIT).until(() -> sent.size() >= 2);
            source.sql("INSERT INTO orders VALUES (5, 50)");
            await().atMost(WAIT).until(() -> sent.size() >= 3);
            assertThat(summary(sent, "orders")).containsExactly("insert orders 1", "insert orders 4", "insert orders 5");
            // each was handed over as the subscription is now (its destination, its lane)
            assertThat(handed).allSatisfy(s -> assertThat(s).isSameAs(registry.router().subscriptions().get(0)));
            // once the acknowledged position passes the edit, what it matched before is no longer kept
            io.walhook.pgoutput.Lsn last = io.walhook.pgoutput.Lsn.parse(sent.get(2).event().at("/tx/commit_lsn").asText());
            await().atMost(WAIT).until(() -> reader.status().acknowledged().compareTo(last) > 0);
            await().atMost(WAIT).until(() -> store.matchedBefore().isEmpty());
        }
    }

    /**
     * An edit waiting for its row's lock (an operator's transaction, another edit) while a change
     * commits: the change committed before the edit did, and is routed as the subscription matched
     * before it. The edit's position was read before its wait, and the change counted as after it.
     */
    @Test
    void aChangeCommittedWhileAnEditWaitsForItsRowIsRoutedAsTheSubscriptionMatchedBefore() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "routing_wait")) {
            source.sql("CREATE TABLE orders (id int PRIMARY KEY, amount numeric)");
            source.prepare("*");
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            String body = ORDERS;
            java.util.UUID id = store.insert(SourceFixture.JSON.readTree(body.formatted("new.amount > 100")));
            java.util.concurrent.CompletableFuture<Boolean> edited;
            try (java.sql.Connection operator = source.dataSource.getConnection();
                 java.sql.Statement s = operator.createStatement()) {
                operator.setAutoCommit(false);
                s.execute("SELECT 1 FROM walhook.subscription WHERE id = '" + id + "' FOR UPDATE");
                edited = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                    try {
                        return store.replace(id, SourceFixture.JSON.readTree(body.formatted("new.amount < 100")));
                    } catch (Exception e) {
                        throw new java.util.concurrent.CompletionException(e);
                    }
                });
                await().atMost(WAIT).until(() -> waitingForALock(source));
                source.sql("INSERT INTO orders VALUES (1, 150)", "INSERT INTO orders VALUES (2, 50)");
                operator.commit();
            }
            assertThat(edited.get(1, java.util.concurrent.TimeUnit.MINUTES)).isTrue();
            source.sql("INSERT INTO orders VALUES (3, 50)");
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(), store);
            registry.refresh();
            List<Sent> sent = new CopyOnWriteArrayList<>();
            source.startReader(r -> recording(r, registry, sent, new CopyOnWriteArrayList<>()));
            await().atMost(WAIT).until(() -> sent.size() >= 2);
            assertThat(summary(sent, "orders")).containsExactly("insert orders 1", "insert orders 3");
        }
    }

    /**
     * A refresh between an edit's commit and the moment its earlier matching is kept until past that
     * commit (another write's notification, the poller's fallback round, a failover's rounds) read
     * the position its transaction read; the later refreshes took the subscriptions as unchanged
     * and never read the moved end: a change committed in between, before the edit, was routed as
     * the subscription matches after it (a narrowing dropped it).
     */
    @Test
    void aRefreshBetweenAnEditsCommitAndItsKeptEndStillRoutesWhatCommittedBeforeTheEditAsBefore() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "routing_between")) {
            source.sql("CREATE TABLE orders (id int PRIMARY KEY, amount numeric)");
            source.prepare("*");
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            java.util.UUID id = store.insert(SourceFixture.JSON.readTree(ORDERS.formatted("new.amount > 100")));
            // the edit's transaction waits (advisory lock 41) once it read its position; the move of its end,
            // after its commit, waits too (lock 42): both held by the test
            source.sql("CREATE FUNCTION walhook.hold_41() RETURNS trigger LANGUAGE plpgsql AS"
                    + " 'BEGIN PERFORM pg_advisory_xact_lock(41); RETURN NEW; END'",
                    "CREATE FUNCTION walhook.hold_42() RETURNS trigger LANGUAGE plpgsql AS"
                    + " 'BEGIN PERFORM pg_advisory_xact_lock(42); RETURN NEW; END'",
                    "CREATE TRIGGER hold_41 AFTER INSERT ON walhook.subscription_matched_before FOR EACH ROW"
                    + " EXECUTE FUNCTION walhook.hold_41()",
                    "CREATE TRIGGER hold_42 BEFORE UPDATE ON walhook.subscription_matched_before FOR EACH ROW"
                    + " EXECUTE FUNCTION walhook.hold_42()");
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(), store);
            registry.refresh();
            java.util.concurrent.CompletableFuture<Boolean> edited;
            String between;
            try (java.sql.Connection test = source.dataSource.getConnection();
                 java.sql.Statement s = test.createStatement()) {
                s.execute("SELECT pg_advisory_lock(41), pg_advisory_lock(42)");
                edited = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                    try {
                        return store.replace(id, SourceFixture.JSON.readTree(ORDERS.formatted("new.amount < 100")));
                    } catch (Exception e) {
                        throw new java.util.concurrent.CompletionException(e);
                    }
                });
                await().atMost(WAIT).until(() -> waitingForAdvisoryLock(source, 41));
                source.sql("INSERT INTO orders VALUES (1, 150)"); // commits before the edit does
                try (java.sql.ResultSet rs = s.executeQuery("SELECT pg_current_wal_lsn()::text")) {
                    rs.next();
                    between = rs.getString(1);
                }
                s.execute("SELECT pg_advisory_unlock(41)"); // the edit commits, then its end's move waits
                await().atMost(WAIT).until(() -> waitingForAdvisoryLock(source, 42));
                registry.refresh(); // a refresh from another write's notification, in that moment
                s.execute("SELECT pg_advisory_unlock(42)");
            }
            assertThat(edited.get(1, java.util.concurrent.TimeUnit.MINUTES)).isTrue();
            registry.refresh(); // the API's own, once the edit answered
            SubscriptionRegistry.Routing routing = registry.routing(io.walhook.pgoutput.Lsn.parse(between));
            assertThat(routing.router().subscriptions()).singleElement()
                    .satisfies(then -> assertThat(then.filter()).get().extracting(io.walhook.routing.CelFilter::expression)
                            .as("the filter of a change committed before the edit").isEqualTo("new.amount > 100"));
        }
    }

    /** Whether a session waits for the advisory lock {@code key}. */
    private static boolean waitingForAdvisoryLock(SourceFixture source, int key) throws java.sql.SQLException {
        try (java.sql.Connection c = source.dataSource.getConnection(); java.sql.Statement s = c.createStatement();
             java.sql.ResultSet rs = s.executeQuery("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                     + " AND objid = " + key + " AND NOT granted")) {
            rs.next();
            return rs.getInt(1) > 0;
        }
    }

    /** Whether a session of this database waits for a lock. */
    private static boolean waitingForALock(SourceFixture source) throws java.sql.SQLException {
        try (java.sql.Connection c = source.dataSource.getConnection(); java.sql.Statement s = c.createStatement();
             java.sql.ResultSet rs = s.executeQuery("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                     + " current_database() AND wait_event_type = 'Lock'")) {
            rs.next();
            return rs.getInt(1) > 0;
        }
    }

    @Test
    void aChangeToOneStoredSubscriptionParsesOnlyThatOne() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "routing_reload")) {
            source.prepare("*");
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(), store);
            String body = "{\"name\": \"%s\", \"filter\": \"new.tenant_id == %d\","
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:9/t\"}}";
            java.util.UUID first = store.insert(SourceFixture.JSON.readTree(String.format(body, "t1", 1)));
            store.insert(SourceFixture.JSON.readTree(String.format(body, "t2", 2)));
            assertThat(registry.refresh()).isTrue();
            List<Subscription> before = registry.router().subscriptions();

            store.insert(SourceFixture.JSON.readTree(String.format(body, "t3", 3)));
            assertThat(registry.refresh()).isTrue();
            List<Subscription> after = registry.router().subscriptions();
            assertThat(after).extracting(Subscription::name).containsExactly("t1", "t2", "t3");
            // the two unchanged ones are the same objects: their filters were not compiled again
            assertThat(after.get(0)).isSameAs(before.get(0));
            assertThat(after.get(1)).isSameAs(before.get(1));

            store.replace(first, SourceFixture.JSON.readTree(String.format(body, "t1", 11)));
            assertThat(registry.refresh()).isTrue();
            Subscription replaced = registry.router().subscriptions().get(0);
            assertThat(replaced).isNotSameAs(after.get(0));
            assertThat(replaced.filter().orElseThrow().expression()).isEqualTo("new.tenant_id == 11");
            assertThat(registry.router().subscriptions().get(1)).isSameAs(before.get(1));
            assertThat(store.find(first).orElseThrow().subscription().filter().orElseThrow().expression())
                    .isEqualTo("new.tenant_id == 11");
            assertThat(store.find(java.util.UUID.randomUUID())).isEmpty();

            // a refresh reads the bodies of those written since it last read (when each was written says which):
            // a body changed by hand without that mark is not read again; paused by hand, or deleted, is seen
            source.sql("UPDATE walhook.subscription SET body = '{}' WHERE name = 't2'");
            assertThat(registry.refresh()).as("nothing written since, as far as the table says").isFalse();
            source.sql("UPDATE walhook.subscription SET paused = true WHERE name = 't2'",
                    "DELETE FROM walhook.subscription WHERE name = 't3'");
            assertThat(registry.refresh()).isTrue();
            assertThat(registry.router().subscriptions()).extracting(Subscription::name).containsExactly("t1", "t2");
            assertThat(registry.router().subscriptions().get(1)).isSameAs(before.get(1));
            assertThat(registry.isPaused(before.get(1).id())).isTrue();

            // a body that does not read here (a newer walhook's): left out of routing, but not taken for deleted
            source.sql("INSERT INTO walhook.subscription (id, name, body) VALUES ('6f1c2b6e-0000-4000-8000-0000000000cc',"
                    + " 'future', '{\"name\": \"future\", \"destination\": {\"type\": \"carrier-pigeon\"}}')");
            assertThat(registry.refresh()).isTrue();
            assertThat(registry.router().subscriptions()).extracting(Subscription::name).containsExactly("t1", "t2");
            assertThat(registry.held()).containsExactly("6f1c2b6e-0000-4000-8000-0000000000cc");
            assertThat(registry.inForce().ids()).contains("6f1c2b6e-0000-4000-8000-0000000000cc");
        }
    }

    @Test
    void aStoredSubscriptionShadowedByAConfiguredOneIsHeldNotGone() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "routing_shadowed")) {
            source.prepare("*");
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            String body = "{\"name\": \"%s\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:9/%s\"}}";
            java.util.UUID stored = store.insert(SourceFixture.JSON.readTree(String.format(body, "orders", "stored")));
            store.insert(SourceFixture.JSON.readTree(String.format(body, "other", "other")));
            // an operator configures a subscription of the stored one's name: the configured one wins
            Subscription configured = io.walhook.routing.SubscriptionJson.parse(
                    SourceFixture.JSON.readTree(String.format(body, "orders", "configured"))).withId(Subscription.CONFIGURED + "orders");
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(configured), store);
            assertThat(registry.refresh()).isTrue();
            assertThat(registry.router().subscriptions()).extracting(Subscription::id)
                    .containsExactly(Subscription.CONFIGURED + "orders", registry.router().subscriptions().get(1).id());
            assertThat(registry.router().subscriptions().get(1).name()).isEqualTo("other");
            // the stored one is held: out of routing, but in force as far as its queue goes
            assertThat(registry.held()).containsExactly(stored.toString());
            assertThat(registry.inForce().ids()).contains(stored.toString(), Subscription.CONFIGURED + "orders");
            // renamed by the API: in force again, held no more
            store.replace(stored, SourceFixture.JSON.readTree(String.format(body, "orders-2", "stored")));
            assertThat(registry.refresh()).isTrue();
            assertThat(registry.held()).isEmpty();
            assertThat(registry.router().subscriptions()).extracting(Subscription::id).contains(stored.toString());
        }
    }
}
