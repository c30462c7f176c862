package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;

import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;
import io.quarkus.test.junit.QuarkusTest;
import io.walhook.testing.PostgresTestResource;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WebhookReceiver;

/** A subscription created through the API receives changes at once; deleted, it stops. */
@QuarkusTest
@QuarkusTestResource(value = SubscriptionApiDeliveryTest.Resource.class, restrictToAnnotatedClass = true)
@ExtendWith(OpenApiContract.class)
class SubscriptionApiDeliveryTest {

    /** A database, a token, and private destinations allowed (the receiver is on 127.0.0.1). */
    public static class Resource implements QuarkusTestResourceLifecycleManager {
        private final PostgresTestResource postgres = new PostgresTestResource();

        @Override
        public Map<String, String> start() {
            Map<String, String> config = new java.util.HashMap<>(postgres.start());
            config.put("walhook.api-token", "t");
            config.put("walhook.allow-private-destinations", "true");
            return config;
        }

        @Override
        public void stop() {
            postgres.stop();
        }
    }

    @ConfigProperty(name = "quarkus.datasource.jdbc.url")
    String jdbcUrl;

    @jakarta.inject.Inject
    io.walhook.pipeline.ReplicationSource source;

    private void sql(String statement) throws Exception {
        try (Connection c = TestPostgres.shared().connect(jdbcUrl.substring(jdbcUrl.lastIndexOf('/') + 1));
             Statement s = c.createStatement()) {
            s.execute(statement);
        }
    }

    /** How many rows {@code query} (a count) gives. */
    private long count(String query) throws Exception {
        try (Connection c = TestPostgres.shared().connect(jdbcUrl.substring(jdbcUrl.lastIndexOf('/') + 1));
             Statement s = c.createStatement(); java.sql.ResultSet rs = s.executeQuery(query)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /** The durable-queue store as another instance's API has it: the same tables, its own connections. */
    private io.walhook.delivery.ParkedEventStore anotherInstancesStore() {
        org.postgresql.ds.PGSimpleDataSource its = new org.postgresql.ds.PGSimpleDataSource();
        its.setURL(jdbcUrl);
        its.setUser(TestPostgres.shared().user());
        its.setPassword(TestPostgres.shared().password());
        return new io.walhook.delivery.ParkedEventStore(its, "walhook");
    }

    /** Creates a subscription through the API; its id. */
    private static String create(String body) {
        return given().header("Authorization", "Bearer t").contentType("application/json").body(body)
                .post("/subscriptions").then().statusCode(201).extract().path("id");
    }

    @Test
    void createdSubscriptionReceivesChangesAndDeletedOneStops() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS tickets (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = create("{\"name\": \"tickets\", \"tables\": [\"public.tickets\"], \"destination\": {\"type\": \"webhook\","
                            + " \"url\": \"" + receiver.url("/t") + "\"}}");
            // in force once its counters are there, at zero before its first event (Prometheus's rate() counts
            // the first one): a change made from then on is routed to it
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().get("/q/metrics").then().statusCode(200)
                    .body(org.hamcrest.Matchers.matchesPattern("(?s).*walhook_delivery_routed_total\\{subscription=\"tickets\",subscription_id=\""
                            + id + "\"} 0.0.*")));
            sql("INSERT INTO tickets VALUES (1)");
            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/t").size() == 1);
            assertThat(receiver.requests("/t").get(0).body()).contains("\"table\":\"tickets\"");
            // events in (routed to it) and events out (delivered), per subscription
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> given().get("/q/metrics").then().statusCode(200)
                    .body(org.hamcrest.Matchers.matchesPattern("(?s).*walhook_delivery_routed_total\\{subscription=\"tickets\",subscription_id=\"[^\"]+\"} 1.0.*"))
                    .body(org.hamcrest.Matchers.matchesPattern("(?s).*walhook_delivery_events_total\\{subscription=\"tickets\",subscription_id=\"[^\"]+\"} 1.0.*")));

            // replaced, it delivers to its new destination, in its new shape
            given().header("Authorization", "Bearer t").contentType("application/json")
                    .body("{\"name\": \"tickets\", \"tables\": [\"public.tickets\"], \"batch\": {\"max_events\": 10},"
                            + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/moved") + "\"}}")
                    .put("/subscriptions/" + id).then().statusCode(200);
            sql("INSERT INTO tickets VALUES (3)");
            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/moved").size() == 1);
            assertThat(receiver.requests("/moved").get(0).body()).startsWith("[").contains("\"new\":{\"id\":3}");
            assertThat(receiver.requests("/t")).hasSize(1);

            given().header("Authorization", "Bearer t").delete("/subscriptions/" + id).then().statusCode(200)
                    .body("discarded_events", org.hamcrest.Matchers.equalTo(0));
            // deleted everywhere once its series leave the scrape: tenants coming and going do not grow it
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().get("/q/metrics").then().statusCode(200)
                    .body(org.hamcrest.Matchers.not(org.hamcrest.Matchers.containsString("subscription_id=\"" + id + "\""))));
            sql("INSERT INTO tickets VALUES (2)");
            await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(10))
                    .until(() -> receiver.requests("/t").size() == 1 && receiver.requests("/moved").size() == 1);
        }
    }

    /**
     * A key column retyped while a backfill reads its table: the chunk after the ALTER was read by the
     * table's description of up to a second before, whose key comparison the server refused
     * ("collations are not supported by type integer"), and that refusal failed the backfill instead
     * of the key change. Its chunks follow each other within milliseconds, so the next one is almost
     * always read by the old description.
     */
    @Test
    void aKeyColumnRetypedWhileABackfillReadsItFailsTheBackfillForItsKeyNotTheServersRefusal() throws Exception {
        sql("CREATE TABLE retyped (id text PRIMARY KEY)");
        sql("INSERT INTO retyped SELECT generate_series(1, 40000)::text");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = create("{\"name\": \"retyped\", \"tables\": [\"public.retyped\"], \"destination\": {\"type\":"
                    + " \"webhook\", \"url\": \"" + receiver.url("/r") + "\"}, \"batch\": {\"max_events\": 100}}");
            String path = given().header("Authorization", "Bearer t").contentType("application/json")
                    .body("{\"chunk_size\": 10, \"max_rows_per_second\": 4000}").post("/subscriptions/" + id + "/backfills")
                    .then().statusCode(202).extract().path("id");
            String backfill = "/subscriptions/" + id + "/backfills/" + path;
            await().atMost(Duration.ofSeconds(30)).until(() -> given().header("Authorization", "Bearer t").get(backfill)
                    .then().extract().<Integer>path("rows_sent") >= 200);
            sql("ALTER TABLE retyped ALTER COLUMN id TYPE int USING id::int");
            await().atMost(Duration.ofSeconds(30)).until(() -> !"running".equals(given().header("Authorization", "Bearer t")
                    .get(backfill).then().extract().path("state")));
            io.restassured.response.ExtractableResponse<?> failed = given().header("Authorization", "Bearer t")
                    .get(backfill).then().extract();
            assertThat(failed.<String>path("state")).isEqualTo("failed");
            assertThat(failed.<String>path("error")).contains("public.retyped")
                    .contains("key changed since the backfill's saved position").contains("now id integer");
        }
    }

    /**
     * A deleted subscription's queue is dropped by the API and by its lane, which learns of the
     * deletion from the database's notification: both at once, the answer counted only the rows the
     * API dropped itself (0 of 5 once in a full run, about half of a large queue). It counts the
     * queue as it was when the subscription was deleted.
     */
    @Test
    void deletingASubscriptionAnswersHowManyEventsItsQueueHeldWhileItsLaneDropsThemToo() throws Exception {
        int rows = 30_000;
        sql("CREATE TABLE IF NOT EXISTS dropped (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = create("{\"name\": \"dropped\", \"tables\": [\"public.dropped\"], \"destination\": {\"type\": \"webhook\","
                            + " \"url\": \"" + receiver.url("/d") + "\"}}");
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/pause").then().statusCode(200);
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                    .get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == 'dropped' }.paused", org.hamcrest.Matchers.equalTo(true)));
            sql("INSERT INTO dropped SELECT g FROM generate_series(1, " + rows + ") g");
            await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                    .get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == 'dropped' }.parked", org.hamcrest.Matchers.equalTo(rows)));
            given().header("Authorization", "Bearer t").delete("/subscriptions/" + id).then().statusCode(200)
                    .body("discarded_events", org.hamcrest.Matchers.equalTo(rows));
            assertThat(receiver.requests("/d")).isEmpty();
        }
    }

    /**
     * Dead letters dropped while their destination fails: the lane had read them back into memory
     * to retry, and 11 of 20 were delivered once the destination recovered, after the operator was
     * told they were dropped for good.
     */
    @Test
    void deadLettersDroppedWhileTheirLaneRetriesThemAreNeverDelivered() throws Exception {
        droppedWhileRetried("poison", id -> given().header("Authorization", "Bearer t")
                .delete("/subscriptions/" + id + "/dead-letters").then().statusCode(200)
                .body("deleted", org.hamcrest.Matchers.equalTo(20)));
    }

    /**
     * The same drop through another instance's API (a standby's, which calls the same store on
     * its own connections): the active instance is told through the database.
     */
    @Test
    void deadLettersDroppedThroughAnotherInstanceAreNeverDeliveredByThisOne() throws Exception {
        io.walhook.delivery.ParkedEventStore itsStore = anotherInstancesStore();
        droppedWhileRetried("poison-elsewhere", id -> {
            try {
                assertThat(itsStore.drop(id, null)).isEqualTo(20);
            } catch (java.sql.SQLException e) {
                throw new AssertionError(e);
            }
        });
    }

    /**
     * A subscription created while the stream lags behind the database (a large transaction to
     * read first): it got the changes committed before it was created, as they were routed after
     * the answer. It gets those committed after the answer, as a widened subscription does.
     */
    @Test
    void aSubscriptionCreatedWhileTheStreamLagsGetsNoChangeCommittedBeforeIt() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS ballast (id int PRIMARY KEY, v int)");
        sql("CREATE TABLE IF NOT EXISTS late_tenant (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            // what the stream reads first, for a few seconds
            sql("INSERT INTO ballast SELECT g, 0 FROM generate_series(1, 1000000) g ON CONFLICT (id) DO UPDATE SET v = ballast.v + 1");
            sql("INSERT INTO late_tenant VALUES (1)");
            String id = create("{\"name\": \"late-tenant\", \"tables\": [\"public.late_tenant\"],"
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/l") + "\"}}");
            sql("INSERT INTO late_tenant VALUES (2)");
            await().atMost(Duration.ofSeconds(60)).until(() -> !receiver.requests("/l").isEmpty());
            await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(
                    receiver.requests("/l").stream().map(r -> r.body().replaceAll(".*\"new\":\\{\"id\":(\\d+)}.*", "$1")))
                    .as("changes to the new subscription %s", id).containsExactly("2"));
        }
    }

    /**
     * A replay asked of another instance (a standby's API, which calls the same store on its own
     * connections): it answered how many events it would replay, and the active instance, which
     * alone delivers, did nothing; a subscription a 410 disabled stayed disabled.
     */
    @Test
    void aReplayAskedOfAnotherInstanceEnablesAndDeliversOnThisOne() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS gone_tenant (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            java.util.concurrent.atomic.AtomicBoolean gone = new java.util.concurrent.atomic.AtomicBoolean(true);
            receiver.respond(r -> gone.get() ? 410 : 200);
            String id = create("{\"name\": \"gone-tenant\", \"tables\": [\"public.gone_tenant\"],"
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/g") + "\"}}");
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().get("/q/metrics").then().statusCode(200)
                    .body(org.hamcrest.Matchers.containsString("subscription_id=\"" + id + "\"")));
            sql("INSERT INTO gone_tenant SELECT g FROM generate_series(1, 3) g");
            await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                    .get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == 'gone-tenant' }.disabled", org.hamcrest.Matchers.equalTo(true))
                    .body("subscriptions.find { it.name == 'gone-tenant' }.parked", org.hamcrest.Matchers.equalTo(3)));
            // kept for a restart or a take-over: a standby that took over found it enabled, and delivered to the endpoint
            await().atMost(Duration.ofSeconds(10)).until(() -> count("SELECT count(*) FROM walhook.gone_endpoint"
                    + " WHERE subscription_id = '" + id + "'") == 1);
            gone.set(false);
            int before = receiver.requests("/g").size();
            anotherInstancesStore().replay(id);
            assertThat(count("SELECT count(*) FROM walhook.gone_endpoint WHERE subscription_id = '" + id + "'"))
                    .as("the replay cleared it, wherever it was asked").isZero();
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(receiver.requests("/g").stream().skip(before)
                    .map(r -> r.body().replaceAll(".*\"new\":\\{\"id\":(\\d+)}.*", "$1")))
                    .as("the queue delivered here").containsExactlyInAnyOrder("1", "2", "3"));
            given().header("Authorization", "Bearer t").get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == 'gone-tenant' }.disabled", org.hamcrest.Matchers.equalTo(false));
            // gone again, then deleted: its record goes with it
            gone.set(true);
            sql("INSERT INTO gone_tenant VALUES (4)");
            await().atMost(Duration.ofSeconds(30)).until(() -> count("SELECT count(*) FROM walhook.gone_endpoint"
                    + " WHERE subscription_id = '" + id + "'") == 1);
            given().header("Authorization", "Bearer t").delete("/subscriptions/" + id).then().statusCode(200);
            await().atMost(Duration.ofSeconds(10)).until(() -> count("SELECT count(*) FROM walhook.gone_endpoint"
                    + " WHERE subscription_id = '" + id + "'") == 0);
        }
    }

    /** 20 events queued and retried from the queue while their destination fails, dropped, then the destination recovers. */
    private void droppedWhileRetried(String name, java.util.function.Consumer<String> drop) throws Exception {
        String table = name.replace('-', '_');
        sql("CREATE TABLE IF NOT EXISTS " + table + " (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            java.util.concurrent.atomic.AtomicBoolean failing = new java.util.concurrent.atomic.AtomicBoolean(true);
            receiver.respond(r -> failing.get() ? 500 : 200);
            String id = create("{\"name\": \"" + name + "\", \"tables\": [\"public." + table + "\"], \"retry\": {\"window_ms\": 1000},"
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/p") + "\"}}");
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().get("/q/metrics").then().statusCode(200)
                    .body(org.hamcrest.Matchers.containsString("subscription_id=\"" + id + "\"")));
            sql("INSERT INTO " + table + " SELECT g FROM generate_series(1, 20) g");
            // queued, and retried from the queue: asked for again after all 20 were queued
            await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                    .get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == '" + name + "' }.parked", org.hamcrest.Matchers.equalTo(20)));
            int asked = receiver.requests("/p").size();
            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/p").size() > asked);
            drop.accept(id);
            // nothing of the queue left in memory: neither under way (one that was may be answered 200 once, so it
            // is let fail first) nor waiting for its next attempt
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                    .get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == '" + name + "' }.in_flight", org.hamcrest.Matchers.equalTo(0))
                    .body("subscriptions.find { it.name == '" + name + "' }.retrying", org.hamcrest.Matchers.equalTo(0))
                    .body("subscriptions.find { it.name == '" + name + "' }.parked", org.hamcrest.Matchers.equalTo(0)));
            int before = receiver.requests("/p").size();
            failing.set(false);
            sql("INSERT INTO " + table + " VALUES (100)");
            await().atMost(Duration.ofSeconds(60)).until(() -> receiver.requests("/p").stream().skip(before)
                    .anyMatch(r -> r.body().contains("\"new\":{\"id\":100}")));
            await().during(Duration.ofSeconds(3)).atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(
                    receiver.requests("/p").stream().skip(before).map(r -> r.body().replaceAll(".*\"new\":\\{\"id\":(\\d+)}.*", "$1")))
                    .as("events sent once the destination took them").containsOnly("100"));
            given().header("Authorization", "Bearer t").get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == '" + name + "' }.parked", org.hamcrest.Matchers.equalTo(0));
        }
    }

    @Test
    void pausedSubscriptionHoldsEventsAndResumeDeliversThemInOrder() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS counters (id int PRIMARY KEY, n int)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = create("{\"name\": \"counters\", \"tables\": [\"public.counters\"], \"destination\": {\"type\": \"webhook\","
                            + " \"url\": \"" + receiver.url("/c") + "\"}}");
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/pause").then().statusCode(200)
                    .body("paused", org.hamcrest.Matchers.equalTo(true));
            sql("INSERT INTO counters VALUES (1, 0)");
            for (int i = 1; i <= 5; i++) {
                sql("UPDATE counters SET n = " + i + " WHERE id = 1");
            }
            await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(10)).until(() -> receiver.requests("/c").isEmpty());
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                    .get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == 'counters' }.parked", org.hamcrest.Matchers.equalTo(6)));

            // the held events are dead letters meanwhile: listed with their event, pageable, deletable
            // query values that are not numbers are the client's mistake, named (not a 404)
            given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer t").get("/subscriptions/" + id + "/dead-letters?limit=four").then().statusCode(400)
                    .contentType("application/problem+json").body("field", org.hamcrest.Matchers.equalTo("limit"));
            given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer t").get("/subscriptions/" + id + "/dead-letters?after=x1").then().statusCode(400)
                    .body("field", org.hamcrest.Matchers.equalTo("after"));
            given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer t")
                    .delete("/subscriptions/" + id + "/dead-letters?id=first")
                    .then().statusCode(400).body("field", org.hamcrest.Matchers.equalTo("id"));
            given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer t")
                    .post("/subscriptions/" + id + "/dead-letters/replay?id=1&id=two")
                    .then().statusCode(400).body("detail", org.hamcrest.Matchers.containsString("'two'"));
            io.restassured.path.json.JsonPath page = given().header("Authorization", "Bearer t").get("/subscriptions/" + id + "/dead-letters?limit=4")
                    .then().statusCode(200).extract().jsonPath();
            assertThat(page.getList("items")).hasSize(4);
            assertThat(page.getInt("items[0].event.new.n")).isZero();
            java.util.Map<String, Object> letter = page.getMap("items[0]");
            assertThat(letter).as("every field but the base64 body, which is for bodies that are not JSON")
                    .containsKeys("id", "event_id", "commit_lsn", "attempts", "last_error", "content_type", "key", "event")
                    .doesNotContainKey("event_base64");
            assertThat(page.getMap("items[0].key")).containsEntry("id", 1);
            assertThat(page.getString("next")).contains("after=");
            given().header("Authorization", "Bearer t").get(page.getString("next")).then().statusCode(200).body("items.size()", org.hamcrest.Matchers.equalTo(2));
            long first = page.getLong("items[0].id");
            given().header("Authorization", "Bearer t").delete("/subscriptions/" + id + "/dead-letters?id=" + first)
                    .then().statusCode(200).body("deleted", org.hamcrest.Matchers.equalTo(1));
            // replaying named dead letters: unknown ones refuse the whole request, known ones are counted
            long second = page.getLong("items[1].id");
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/dead-letters/replay?id=" + second
                    + "&id=" + first).then().statusCode(404).body("detail", org.hamcrest.Matchers.containsString("[" + first + "]"));
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/dead-letters/replay?id=" + second)
                    .then().statusCode(200).body("replaying", org.hamcrest.Matchers.equalTo(1));
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/dead-letters/replay")
                    .then().statusCode(200).body("replaying", org.hamcrest.Matchers.equalTo(5));

            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/resume").then().statusCode(200)
                    .body("paused", org.hamcrest.Matchers.equalTo(false));
            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/c").size() == 5);
            assertThat(receiver.requests("/c").stream().map(r -> r.body().replaceAll(".*\"new\":\\{\"id\":1,\"n\":(\\d+)}.*", "$1")))
                    .as("the deleted dead letter is gone, the rest arrive in order").containsExactly("1", "2", "3", "4", "5");
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> given().header("Authorization", "Bearer t").get("/subscriptions/" + id + "/dead-letters")
                    .then().body("items.size()", org.hamcrest.Matchers.equalTo(0)));
        }
    }

    /**
     * Dead letters pile up when rows are large and the destination refuses them: a page of them is
     * bounded in bytes as the lanes' read-back is, or a page of 100 rows of 10 MB (and their JSON
     * trees) would take a gigabyte of the heap the stream shares. The first item comes whatever its
     * size; {@code next} goes on where the bytes ran out.
     */
    @Test
    void aPageOfLargeDeadLettersIsBoundedInBytesAndNextGoesOn() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS documents (id int PRIMARY KEY, body text)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = create("{\"name\": \"documents\", \"tables\": [\"public.documents\"], \"destination\":"
                    + " {\"type\": \"webhook\", \"url\": \"" + receiver.url("/d") + "\"}}");
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/pause").then().statusCode(200);
            int third = (int) (io.walhook.api.DeadLetterResource.PAGE_BODY_BYTES / 3);
            // two rows fit in a page's bytes, a third does not; a fourth, larger than a page, comes alone
            sql("INSERT INTO documents SELECT i, repeat('x', " + third + " - 200) FROM generate_series(1, 3) i");
            sql("INSERT INTO documents VALUES (4, repeat('y', " + (third * 4) + "))");
            sql("INSERT INTO documents VALUES (5, 'small')");
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                    .get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == 'documents' }.parked", org.hamcrest.Matchers.equalTo(5)));
            java.util.List<java.util.List<Integer>> pages = new java.util.ArrayList<>();
            String next = "/subscriptions/" + id + "/dead-letters";
            while (next != null) {
                io.restassured.path.json.JsonPath page = given().filter(OpenApiContract.responsesOnly())
                        .header("Authorization", "Bearer t").get(next).then().statusCode(200).extract().jsonPath();
                pages.add(page.getList("items.event.new.id", Integer.class));
                next = page.getString("next");
                assertThat(pages).as("pages so far").hasSizeLessThan(10);
            }
            assertThat(pages).as("the ids of each page").containsExactly(java.util.List.of(1, 2), java.util.List.of(3),
                    java.util.List.of(4), java.util.List.of(5));
            given().header("Authorization", "Bearer t").delete("/subscriptions/" + id).then().statusCode(200);
        }
    }

    /**
     * An error text stored with a queued event by a walhook older than 2026-12-05 named the
     * destination with its path as written, and so with the token a Slack, Discord or Teams webhook
     * carries there, and with its user info and query string if a server's message quoted them. The
     * API shows it as logs show a destination now.
     */
    @Test
    void aDeadLettersErrorStoredByAnEarlierWalhookIsShownWithoutThePathToken() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS slack_alerts (id int PRIMARY KEY)");
        String id = create("{\"name\": \"slack-alerts\", \"tables\": [\"public.slack_alerts\"], \"destination\":"
                + " {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:9/alerts\"}}");
        given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/pause").then().statusCode(200);
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> {
            sql("INSERT INTO slack_alerts SELECT coalesce(max(id), 0) + 1 FROM slack_alerts");
            given().header("Authorization", "Bearer t").get("/subscriptions/" + id + "/dead-letters").then().statusCode(200)
                    .body("items.size()", org.hamcrest.Matchers.greaterThan(0));
        });
        String token = "Xq7mB2kLp9Rt4vWz8nYc3Dd1";
        // as the HTTP client worded a timeout: the path on its own
        sql("UPDATE walhook.parked_event SET last_error = 'The timeout period of 10000ms has been exceeded while executing"
                + " POST /services/T0AB12CD3/B0EF45GH6/" + token + "?channel=s3cr3t-chan for server hooks.slack.com:443'"
                + " WHERE subscription_id = '" + id + "'");
        String lastError = given().header("Authorization", "Bearer t").get("/subscriptions/" + id + "/dead-letters")
                .then().statusCode(200).extract().jsonPath().getString("items[0].last_error");
        assertThat(lastError).isEqualTo("The timeout period of 10000ms has been exceeded while executing POST"
                + " /services/T0AB12CD3/B0EF45GH6/[redacted] for server hooks.slack.com:443");
        sql("UPDATE walhook.parked_event SET last_error = 'HTTP 404 from https://ops:pa55word@hooks.slack.com/services/"
                + "T0AB12CD3/B0EF45GH6/" + token + "?channel=s3cr3t-chan: no_team' WHERE subscription_id = '" + id + "'");
        lastError = given().header("Authorization", "Bearer t").get("/subscriptions/" + id + "/dead-letters")
                .then().statusCode(200).extract().jsonPath().getString("items[0].last_error");
        assertThat(lastError).isEqualTo("HTTP 404 from https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/[redacted]: no_team");
    }

    /**
     * An empty or malformed query value is the client's mistake, a 400 naming the parameter: never
     * read as "no filter", which for a delete or a replay means every dead letter.
     */
    @Test
    void emptyOrMalformedQueryValuesAreBadRequestsNotAll() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS pallets (id int PRIMARY KEY)");
        String id = create("{\"name\": \"pallets\", \"tables\": [\"public.pallets\"], \"destination\": {\"type\": \"webhook\","
                + " \"url\": \"http://127.0.0.1:9/p\"}}");
        given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/pause").then().statusCode(200);
        sql("INSERT INTO pallets VALUES (1), (2), (3)");
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                .get("/subscriptions/" + id + "/dead-letters").then().statusCode(200)
                .body("items.size()", org.hamcrest.Matchers.equalTo(3)));
        String deadLetters = "/subscriptions/" + id + "/dead-letters";
        org.assertj.core.api.SoftAssertions softly = new org.assertj.core.api.SoftAssertions();
        for (String[] c : new String[][] {
            {"DELETE", deadLetters + "?id=", "id"},
            {"DELETE", deadLetters + "?id=&id=", "id"},
            {"DELETE", deadLetters + "?id", "id"},
            {"DELETE", deadLetters + "?id=abc", "id"},
            {"DELETE", deadLetters + "?id=%20", "id"},
            {"DELETE", deadLetters + "?id=1&id=", "id"},
            {"DELETE", deadLetters + "?ids=1", "ids"},
            {"POST", deadLetters + "/replay?id=", "id"},
            {"POST", deadLetters + "/replay?id=abc", "id"},
            {"GET", deadLetters + "?limit=", "limit"},
            {"GET", deadLetters + "?limit=0", "limit"},
            {"GET", deadLetters + "?limit=1001", "limit"},
            {"GET", deadLetters + "?limit=-1", "limit"},
            {"GET", deadLetters + "?limit=1&limit=2", "limit"},
            {"GET", deadLetters + "?after=", "after"},
            {"GET", deadLetters + "?after=-1", "after"},
            {"GET", deadLetters + "?after=x", "after"},
        }) {
            io.restassured.response.Response response = given().filter(OpenApiContract.responsesOnly())
                    .urlEncodingEnabled(false).header("Authorization", "Bearer t").request(c[0], c[1]);
            softly.assertThat(response.statusCode()).as(c[0] + " " + c[1] + ": " + response.asString()).isEqualTo(400);
            softly.assertThat(response.contentType()).as(c[0] + " " + c[1]).startsWith(ApiProblem.MEDIA_TYPE);
            if (response.statusCode() == 400) {
                softly.assertThat(response.jsonPath().getString("field")).as(c[0] + " " + c[1]).isEqualTo(c[2]);
                softly.assertThat(response.jsonPath().getString("detail")).as(c[0] + " " + c[1]).contains(c[2]);
            }
        }
        softly.assertAll();
        given().header("Authorization", "Bearer t").get(deadLetters).then().statusCode(200)
                .body("items.size()", org.hamcrest.Matchers.equalTo(3));
        // no parameter at all is every one
        given().header("Authorization", "Bearer t").delete(deadLetters).then().statusCode(200)
                .body("deleted", org.hamcrest.Matchers.equalTo(3));
    }

    @Test
    void heldEventsOfABatchingSubscriptionAreReplayedAsArraysInOrder() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS gauges (id int PRIMARY KEY, n int)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = create("{\"name\": \"gauges\", \"tables\": [\"public.gauges\"], \"batch\": {\"max_events\": 3},"
                            + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/g") + "\"}}");
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/pause").then().statusCode(200);
            sql("INSERT INTO gauges VALUES (1, 0)");
            for (int i = 1; i <= 4; i++) {
                sql("UPDATE gauges SET n = " + i + " WHERE id = 1");
            }
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> given().header("Authorization", "Bearer t").get("/status").then()
                    .body("subscriptions.find { it.name == 'gauges' }.parked", org.hamcrest.Matchers.equalTo(5)));
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/resume").then().statusCode(200);

            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/g").size() == 2);
            com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
            java.util.List<Integer> ns = new java.util.ArrayList<>();
            java.util.List<Integer> sizes = new java.util.ArrayList<>();
            for (WebhookReceiver.Request request : receiver.requests("/g")) {
                com.fasterxml.jackson.databind.JsonNode batch = json.readTree(request.body());
                assertThat(batch.isArray()).as(request.body()).isTrue();
                assertThat(request.header("webhook-id")).isEqualTo(io.walhook.testing.WebhookReceiver.batchId(batch));
                sizes.add(batch.size());
                batch.forEach(e -> ns.add(e.at("/new/n").asInt()));
            }
            assertThat(sizes).containsExactly(3, 2);
            assertThat(ns).containsExactly(0, 1, 2, 3, 4);
        }
    }

    @Test
    void aChangeTheApiReloadedFirstStillReachesDelivery() throws Exception {
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String body = "{\"name\": \"%s\", \"tables\": [\"nomatch.nomatch\"], \"destination\": {\"type\": \"webhook\","
                    + " \"url\": \"" + receiver.url("/r") + "\"}}";
            String gone = create(body.formatted("gone-by-hand"));
            String other = create(body.formatted("fired-at"));
            String series = "subscription_id=\"" + gone + "\"";
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().get("/q/metrics").then().statusCode(200)
                    .body(org.hamcrest.Matchers.containsString(series)));
            // deleted by hand (no notification), then a test-fire reloads the subscriptions on the API's thread:
            // the poller's own reload then finds nothing new, and delivery must still hear of the deletion
            sql("DELETE FROM walhook.subscription WHERE id = '" + gone + "'");
            given().header("Authorization", "Bearer t").post("/subscriptions/" + other + "/test").then().statusCode(200);
            sql("SELECT pg_notify('walhook_subscriptions', '')");
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().get("/q/metrics").then().statusCode(200)
                    .body(org.hamcrest.Matchers.not(org.hamcrest.Matchers.containsString(series))));
        }
    }

    /**
     * The contract's own example filter, on a table of the default replica identity: an update's old
     * row carries only the key, so {@code old.status} fails on every update. Each such event is not
     * sent; /status says so, where before nothing did.
     */
    @Test
    void aFilterThatFailsOnEventsSaysSoInStatus() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS paid (id int PRIMARY KEY, status text)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            create("{\"name\": \"paidonly\", \"tables\": [\"public.paid\"], \"filter\": \"op == 'update' &&"
                    + " new.status != old.status\", \"destination\": {\"type\": \"webhook\", \"url\": \""
                    + receiver.url("/paid") + "\"}}");
            await().atMost(Duration.ofSeconds(15)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                    .get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == 'paidonly' }.filter_errors", org.hamcrest.Matchers.equalTo(0))
                    .body("subscriptions.find { it.name == 'paidonly' }", org.hamcrest.Matchers.hasKey("filter_last_error")));
            sql("INSERT INTO paid VALUES (1, 'new')");
            sql("UPDATE paid SET status = 'paid' WHERE id = 1");
            sql("UPDATE paid SET status = 'shipped' WHERE id = 1");
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().header("Authorization", "Bearer t")
                    .get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == 'paidonly' }.filter_errors", org.hamcrest.Matchers.equalTo(2))
                    .body("subscriptions.find { it.name == 'paidonly' }.filter_last_error",
                            org.hamcrest.Matchers.containsString("filter failed on event ")));
            assertThat(receiver.requests("/paid")).isEmpty();
        }
    }

    @Test
    void testFireSendsASignedTestEventAndReportsTheOutcome() {
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> request.path().equals("/down") ? 503 : 202);
            String id = create("{\"name\": \"fire\", \"tables\": [\"nomatch.nomatch\"], \"destination\": {\"type\": \"webhook\","
                            + " \"url\": \"" + receiver.url("/fire") + "\", \"secret\": \"whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=\"}}");
            // right after the create, not once routing has caught up
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/test").then().statusCode(200)
                    .body("delivered", org.hamcrest.Matchers.equalTo(true))
                    .body("status", org.hamcrest.Matchers.equalTo(202));
            // listed in /status once in force (within a second), with zeros, though no event has reached it
            await().atMost(Duration.ofSeconds(15)).untilAsserted(() -> given().header("Authorization", "Bearer t").get("/status").then().statusCode(200)
                    .body("subscriptions.find { it.name == 'fire' }.delivered", org.hamcrest.Matchers.equalTo(0))
                    .body("subscriptions.find { it.name == 'fire' }.retrying", org.hamcrest.Matchers.equalTo(0))
                    // an unknown value is a null, not a missing field
                    .body("subscriptions.find { it.name == 'fire' }", org.hamcrest.Matchers.hasKey("last_error")));
            WebhookReceiver.Request fired = receiver.requests("/fire").get(0);
            assertThat(fired.body()).contains("\"op\":\"test\"");
            assertThat(fired.header("webhook-signature")).startsWith("v1,");
            assertThat(fired.header("webhook-id")).startsWith("test_");
            // and right after a PUT, at the new destination
            given().header("Authorization", "Bearer t").contentType("application/json").body("{\"name\": \"fire\","
                    + " \"tables\": [\"nomatch.nomatch\"], \"destination\": {\"type\": \"webhook\", \"url\": \""
                    + receiver.url("/moved") + "\"}}").put("/subscriptions/" + id).then().statusCode(200);
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/test").then().statusCode(200)
                    .body("delivered", org.hamcrest.Matchers.equalTo(true));
            assertThat(receiver.requests("/moved")).hasSize(1);
            assertThat(receiver.requests("/fire")).hasSize(1);

            String down = create("{\"name\": \"firedown\", \"tables\": [\"nomatch.nomatch\"], \"destination\": {\"type\": \"webhook\","
                            + " \"url\": \"" + receiver.url("/down") + "\"}}");
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() ->
                    given().header("Authorization", "Bearer t").post("/subscriptions/" + down + "/test").then().statusCode(200)
                            .body("delivered", org.hamcrest.Matchers.equalTo(false))
                            .body("status", org.hamcrest.Matchers.equalTo(503)));
        }
    }

    /**
     * A PATCH of the filter and one header leaves the secret, the URL's query and the other headers as
     * they were: changes after it arrive signed with the secret, at the URL with its query, with the
     * headers kept and the one added, and as the new filter says.
     */
    @Test
    void aPatchedSubscriptionDeliversWithWhatThePatchLeftAsItWas() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS patched (id int PRIMARY KEY)");
        String secret = "whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=";
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = create("{\"name\": \"patched\", \"tables\": [\"public.patched\"], \"filter\": \"new.id > 0\","
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/p?token=t0k") + "\","
                    + " \"secret\": \"" + secret + "\", \"headers\": {\"X-Tenant\": \"42\", \"X-Drop\": \"d\"}}}");
            given().header("Authorization", "Bearer t").contentType("application/merge-patch+json")
                    .body("{\"filter\": \"new.id > 10\", \"destination\": {\"headers\": {\"X-Drop\": null, \"X-Added\": \"a\"}}}")
                    .patch("/subscriptions/" + id).then().statusCode(200);
            sql("INSERT INTO patched VALUES (5), (11)");
            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/p").size() == 1);
            WebhookReceiver.Request request = receiver.requests("/p").get(0);
            assertThat(request.body()).contains("\"new\":{\"id\":11}");
            assertThat(request.query()).isEqualTo("token=t0k");
            assertThat(request.header("X-Tenant")).isEqualTo("42");
            assertThat(request.header("X-Added")).isEqualTo("a");
            assertThat(request.header("X-Drop")).isNull();
            javax.crypto.Mac mac = javax.crypto.Mac.getInstance("HmacSHA256");
            mac.init(new javax.crypto.spec.SecretKeySpec(java.util.Base64.getDecoder().decode(secret.substring("whsec_".length())),
                    "HmacSHA256"));
            String signed = request.header("webhook-id") + "." + request.header("webhook-timestamp") + "." + request.body();
            assertThat(request.header("webhook-signature")).isEqualTo("v1," + java.util.Base64.getEncoder()
                    .encodeToString(mac.doFinal(signed.getBytes(java.nio.charset.StandardCharsets.UTF_8))));
            // the filter removed: every row
            given().header("Authorization", "Bearer t").contentType("application/merge-patch+json")
                    .body("{\"filter\": null}").patch("/subscriptions/" + id).then().statusCode(200);
            sql("INSERT INTO patched VALUES (6)");
            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/p").size() == 2);
            assertThat(receiver.requests("/p").get(1).body()).contains("\"new\":{\"id\":6}");
            given().header("Authorization", "Bearer t").delete("/subscriptions/" + id).then().statusCode(200);
        }
    }

    /**
     * A table with REPLICA IDENTITY FULL and a primary key: a row its destination keeps refusing holds
     * back only its own later changes, as under the default identity. Ordered by the table (every
     * column is "key" under FULL), the other rows waited for the refused one's retry window.
     */
    @Test
    void aRefusedRowOfAFullIdentityTableHoldsBackOnlyItsOwnChanges() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS fullrows (id int PRIMARY KEY, n int)");
        sql("ALTER TABLE fullrows REPLICA IDENTITY FULL");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> request.body().contains("\"id\":1,") ? 500 : 204);
            String id = create("{\"name\": \"fullrows\", \"tables\": [\"public.fullrows\"], \"retry\": {\"window_ms\":"
                    + " 600000}, \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/f") + "\"}}");
            await().atMost(Duration.ofSeconds(30)).until(() -> routed(id).isPresent());
            sql("INSERT INTO fullrows VALUES (1, 0)");
            await().atMost(Duration.ofSeconds(30)).until(() -> !receiver.requests("/f").isEmpty());
            sql("INSERT INTO fullrows VALUES (2, 0)");
            sql("UPDATE fullrows SET n = 1 WHERE id = 2");
            sql("UPDATE fullrows SET n = 1 WHERE id = 1");
            // row 2's changes arrive, in order, while row 1 is still refused
            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/f").stream()
                    .filter(r -> r.body().contains("\"id\":2,\"n\":1")).count() == 1);
            java.util.List<String> row2 = receiver.requests("/f").stream().map(WebhookReceiver.Request::body)
                    .filter(b -> b.contains("\"new\":{\"id\":2,")).toList();
            assertThat(row2).hasSize(2);
            assertThat(row2.get(0)).contains("\"op\":\"insert\"");
            assertThat(row2.get(1)).contains("\"op\":\"update\"").contains("\"old\":{\"id\":2,\"n\":0}");
            // row 1's update waits behind its insert
            assertThat(receiver.requests("/f").stream().filter(r -> r.body().contains("\"new\":{\"id\":1,\"n\":1}")))
                    .isEmpty();
            given().header("Authorization", "Bearer t").delete("/subscriptions/" + id).then().statusCode(200);
        }
    }

    private java.util.Optional<io.walhook.routing.Subscription> routed(String id) {
        return source.registry().router().subscriptions().stream().filter(s -> s.id().equals(id)).findFirst();
    }

    /**
     * Each write is in force for routing by the time it is answered: a change committed right after a
     * create is routed to the new subscription, after a pause it waits, after a PUT it meets the new
     * filter, after a delete it is not routed. Left to the notification, routing took the write up a
     * few milliseconds later, and a tenant's first change, committed at once, could miss it.
     */
    @Test
    void aWriteIsInForceForRoutingWhenItIsAnswered() {
        String body = "{\"name\": \"%s\", \"tables\": [\"public.tickets\"], \"destination\": {\"type\": \"webhook\","
                + " \"url\": \"http://127.0.0.1:9/hook\"}}";
        for (int round = 0; round < 10; round++) {
            String id = create(body.formatted("applied-" + round));
            assertThat(routed(id)).as("created, round " + round).isPresent();
            given().header("Authorization", "Bearer t").post("/subscriptions/" + id + "/pause").then().statusCode(200);
            assertThat(source.registry().isPaused(id)).as("paused, round " + round).isTrue();
            given().header("Authorization", "Bearer t").contentType("application/json")
                    .body(body.formatted("replaced-" + round)).put("/subscriptions/" + id).then().statusCode(200);
            assertThat(routed(id).map(io.walhook.routing.Subscription::name)).as("replaced, round " + round)
                    .contains("replaced-" + round);
            given().header("Authorization", "Bearer t").delete("/subscriptions/" + id).then().statusCode(200);
            assertThat(routed(id)).as("deleted, round " + round).isEmpty();
        }
    }

    /** A PUT's new destination takes every change committed after its answer, none of them going to the old one. */
    @Test
    void aChangeCommittedRightAfterAPutGoesToTheNewDestination() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS moves (id int PRIMARY KEY)");
        String body = "{\"name\": \"moving\", \"tables\": [\"public.moves\"], \"destination\": {\"type\": \"webhook\","
                + " \"url\": \"%s\"}}";
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = create(body.formatted(receiver.url("/at0")));
            await().atMost(Duration.ofSeconds(30)).until(() -> routed(id).isPresent());
            sql("INSERT INTO moves VALUES (0)");
            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/at0").size() == 1);
            for (int round = 1; round <= 5; round++) {
                // the instances' listening sessions end: the write's notification is lost, the poller reads the
                // subscriptions at its next round (2 s); only what the answering instance did itself holds meanwhile
                sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                        + " AND query ILIKE 'LISTEN%'");
                given().header("Authorization", "Bearer t").contentType("application/json")
                        .body(body.formatted(receiver.url("/at" + round))).put("/subscriptions/" + id).then().statusCode(200);
                sql("INSERT INTO moves VALUES (" + round + ")");
                String path = "/at" + round;
                await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests(path).size() == 1);
                assertThat(receiver.requests("/at" + (round - 1))).as("the destination before round " + round).hasSize(1);
            }
        }
    }

    /**
     * A backfill saved by an earlier walhook, which read a covering key's INCLUDE columns as key too,
     * resumes after the row its position names: its key columns come first and are unique.
     */
    @Test
    void aBackfillSavedWithACoveringKeysIncludedColumnResumesAfterItsRow() throws Exception {
        sql("CREATE TABLE IF NOT EXISTS covered (id int, tag text, PRIMARY KEY (id) INCLUDE (tag))");
        sql("INSERT INTO covered SELECT g, 't' || g FROM generate_series(1, 6) g");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = create("{\"name\": \"covered\", \"tables\": [\"public.covered\"], \"destination\":"
                    + " {\"type\": \"webhook\", \"url\": \"" + receiver.url("/covered") + "\"}}");
            String path = "/subscriptions/" + id + "/backfills/";
            String backfill = given().header("Authorization", "Bearer t").contentType("application/json")
                    .body("{\"chunk_size\": 1, \"max_rows_per_second\": 1}").post(path).then().statusCode(202)
                    .extract().path("id");
            given().header("Authorization", "Bearer t").post(path + backfill + "/pause").then().statusCode(200);
            // whatever was under way at the pause has saved its progress
            await().pollDelay(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(10)).until(() -> true);
            sql("UPDATE walhook.backfill SET progress = '{\"public.covered\": {\"cursor\": [\"3\", \"t3\"],"
                    + " \"rows_sent\": 3, \"done\": false}}' WHERE id = '" + backfill + "'");
            given().header("Authorization", "Bearer t").post(path + backfill + "/resume").then().statusCode(200);
            await().atMost(Duration.ofSeconds(60)).until(() -> "done".equals(given().header("Authorization", "Bearer t")
                    .get(path + backfill).then().statusCode(200).extract().path("state")));
            String received = String.join("\n", receiver.requests("/covered").stream().map(WebhookReceiver.Request::body)
                    .toList());
            assertThat(received).contains("\"id\":4").contains("\"id\":5").contains("\"id\":6");
        }
    }
}
