package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.qpid.proton.message.Message;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.AmqpReceiver;
import io.walhook.testing.EmbeddedArtemis;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;

/** The packaged walhook delivering to a real AMQP 1.0 broker (Apache ActiveMQ Artemis, embedded). */
class AmqpDeliveryIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void eachEventIsOneDurableMessageWithItsIdInPerRowOrderAndBinaryCloudEventsCarryTheirAttributes() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("amqp");
        pg.execute(database, "CREATE TABLE orders (id int PRIMARY KEY, n int)");
        try (EmbeddedArtemis broker = EmbeddedArtemis.start();
             AmqpReceiver orders = AmqpReceiver.start("127.0.0.1", broker.port(), null, null, "walhook.public.orders");
             AmqpReceiver cloudEvents = AmqpReceiver.start("127.0.0.1", broker.port(), null, null, "ce.orders");
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database, "WALHOOK_AMQP_URL", broker.url(),
                     "WALHOOK_SUBSCRIPTIONS_ORDERS_AMQP_ADDRESS", "walhook.{schema}.{table}",
                     "WALHOOK_SUBSCRIPTIONS_CE_AMQP_ADDRESS", "ce.{table}",
                     "WALHOOK_SUBSCRIPTIONS_CE_FORMAT", "cloudevents-binary",
                     "WALHOOK_SUBSCRIPTIONS_CE_OPERATIONS", "insert"))) {
            walhook.awaitReady(WAIT);
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute("INSERT INTO orders SELECT g, 0 FROM generate_series(1, 20) g");
                for (int n = 1; n <= 5; n++) {
                    s.execute("UPDATE orders SET n = " + n);
                }
            }
            await().atMost(WAIT).until(() -> orders.messages().size() >= 120 && cloudEvents.messages().size() >= 20);

            Map<Integer, List<Integer>> perRow = new HashMap<>();
            Set<String> ids = new TreeSet<>();
            for (Message m : orders.messages()) {
                JsonNode event = JSON.readTree(AmqpReceiver.body(m));
                assertThat(m.getMessageId()).isEqualTo(event.get("id").asText());
                assertThat(m.getContentType()).isEqualTo("application/json");
                assertThat(m.isDurable()).isTrue();
                assertThat(event.get("table").asText()).isEqualTo("orders");
                ids.add(event.get("id").asText());
                perRow.computeIfAbsent(event.at("/new/id").asInt(), k -> new ArrayList<>()).add(event.at("/new/n").asInt());
            }
            assertThat(ids).hasSize(120);
            assertThat(perRow).hasSize(20);
            assertThat(perRow.values()).allSatisfy(ns -> assertThat(ns).containsExactly(0, 1, 2, 3, 4, 5));

            assertThat(cloudEvents.messages()).hasSize(20);
            for (Message m : cloudEvents.messages()) {
                JsonNode data = JSON.readTree(AmqpReceiver.body(m));
                Map<String, Object> properties = m.getApplicationProperties().getValue();
                assertThat(properties).containsEntry("cloudEvents:specversion", "1.0")
                        .containsEntry("cloudEvents:id", data.get("id").asText())
                        .containsEntry("cloudEvents:type", "io.walhook.insert")
                        .containsEntry("cloudEvents:subject", "public.orders")
                        .containsEntry("cloudEvents:source", "/walhook/" + database);
                assertThat(m.getContentType()).isEqualTo("application/json");
                assertThat(m.getMessageId()).isEqualTo(data.get("id").asText());
            }
        }
    }

    @Test
    void aBackfillIntoAnAmqpSubscriptionSendsEachRowOnceAsAReadMessage() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("amqp_backfill");
        pg.execute(database, "CREATE TABLE orders (id int PRIMARY KEY, n int)",
                "INSERT INTO orders SELECT g, g FROM generate_series(1, 500) g");
        try (EmbeddedArtemis broker = EmbeddedArtemis.start();
             AmqpReceiver reads = AmqpReceiver.start("127.0.0.1", broker.port(), null, null, "bf.orders.read");
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database, "WALHOOK_AMQP_URL", broker.url(), "WALHOOK_API_TOKEN", "t",
                     "WALHOOK_SUBSCRIPTIONS_BF_AMQP_ADDRESS", "bf.{table}.{op}",
                     "WALHOOK_SUBSCRIPTIONS_BF_FORMAT", "cloudevents-binary"))) {
            walhook.awaitReady(WAIT);
            io.walhook.testing.ApiClient api = new io.walhook.testing.ApiClient(walhook, "t");
            io.walhook.testing.ApiClient.Answer started = api.post("/subscriptions/config:bf/backfills",
                    "{\"chunk_size\": 64}");
            assertThat(started.status()).as(started.text()).isEqualTo(202);
            await().atMost(WAIT).until(() -> reads.messages().size() >= 500);
            Set<Integer> rows = new TreeSet<>();
            for (Message m : reads.messages()) {
                JsonNode data = JSON.readTree(AmqpReceiver.body(m));
                assertThat(data.get("op").asText()).isEqualTo("read");
                assertThat(data.at("/backfill/id").asText()).isEqualTo(started.body().get("id").asText());
                assertThat(m.getMessageId()).isEqualTo(data.get("id").asText());
                assertThat(m.getApplicationProperties().getValue()).containsEntry("cloudEvents:type", "io.walhook.read");
                assertThat(data.at("/new/n").asInt()).isEqualTo(data.at("/new/id").asInt());
                rows.add(data.at("/new/id").asInt());
            }
            assertThat(rows).hasSize(500);
            await().atMost(WAIT).until(() -> api.get("/subscriptions/config:bf/backfills/" + started.body().get("id")
                    .asText()).body().get("state").asText().equals("done"));
            assertThat(reads.messages()).hasSize(500);
        }
    }

    @Test
    void aBrokerStoppedMidStreamLosesNothingAndRedeliveriesKeepTheirMessageId() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("amqpoutage");
        pg.execute(database, "CREATE TABLE ticks (id int PRIMARY KEY)");
        int rows = 300;
        try (EmbeddedArtemis broker = EmbeddedArtemis.start();
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database, "WALHOOK_AMQP_URL", broker.url(),
                     "WALHOOK_DELIVERY_REQUEST_TIMEOUT", "5s", "WALHOOK_DELIVERY_MAX_BACKOFF", "1s",
                     "WALHOOK_SUBSCRIPTIONS_TICKS_AMQP_ADDRESS", "ticks"))) {
            walhook.awaitReady(WAIT);
            List<Message> received = new java.util.ArrayList<>();
            Thread writer = new Thread(() -> {
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    for (int i = 1; i <= rows; i++) {
                        s.execute("INSERT INTO ticks VALUES (" + i + ")");
                        Thread.sleep(10);
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            writer.start();
            // a consumer takes the first messages and leaves (cleanly: what it took is acknowledged; an
            // embedded Artemis stopped under a consumer can drop a message it was handing over, which
            // says nothing about walhook); the broker goes away mid-stream while walhook sends, and comes back
            AmqpReceiver early = AmqpReceiver.start("127.0.0.1", broker.port(), null, null, "ticks");
            try {
                await().atMost(WAIT).until(() -> early.messages().size() >= 50);
            } finally {
                early.close();
            }
            // read after it left: it accepts what it receives, so a message that came between the
            // count above and its leaving is gone from the broker and only in its list (lanes run
            // concurrently, so such a message may be any row: rows 6 and 13 once came after row 50)
            received.addAll(early.messages());
            broker.stop();
            Thread.sleep(2000);
            broker.restart();
            writer.join();
            try (AmqpReceiver late = AmqpReceiver.start("127.0.0.1", broker.port(), null, null, "ticks")) {
                try {
                    await().atMost(WAIT).until(() -> distinctRows(concat(received, late.messages())).size() == rows);
                } catch (org.awaitility.core.ConditionTimeoutException e) {
                    Set<Integer> missing = new TreeSet<>();
                    for (int i = 1; i <= rows; i++) {
                        missing.add(i);
                    }
                    missing.removeAll(distinctRows(concat(received, late.messages())));
                    throw new AssertionError(rows - missing.size() + " of " + rows + " rows arrived, missing " + missing
                            + "; walhook:\n" + walhook.output(), e);
                }
                received.addAll(late.messages());
            }
            Map<String, Integer> rowOfId = new LinkedHashMap<>();
            for (Message m : received) {
                JsonNode event = JSON.readTree(AmqpReceiver.body(m));
                assertThat(m.getMessageId()).as("a redelivered event keeps its message-id").isEqualTo(event.get("id").asText());
                Integer before = rowOfId.put(event.get("id").asText(), event.at("/new/id").asInt());
                assertThat(before == null || before == event.at("/new/id").asInt()).isTrue();
            }
            assertThat(walhook.output()).contains("unsettled messages will be sent again");
        }
    }

    private static List<Message> concat(List<Message> a, List<Message> b) {
        List<Message> all = new java.util.ArrayList<>(a);
        all.addAll(b);
        return all;
    }

    @Test
    void anAddressTheBrokerRefusesIsParkedWhileOthersFlowAndTheSlotAdvances() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("amqprefuse");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY)");
        try (EmbeddedArtemis broker = EmbeddedArtemis.start();
             AmqpReceiver items = AmqpReceiver.start("127.0.0.1", broker.port(), null, null, "items");
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database, "WALHOOK_AMQP_URL", broker.url(),
                     "WALHOOK_DELIVERY_RETRY_WINDOW", "1s", "WALHOOK_DELIVERY_PARKED_RETRY_INTERVAL", "1s",
                     "WALHOOK_API_TOKEN", "t",
                     "WALHOOK_SUBSCRIPTIONS_GOOD_AMQP_ADDRESS", "items",
                     "WALHOOK_SUBSCRIPTIONS_REFUSED_AMQP_ADDRESS", "refuse.items"))) {
            walhook.awaitReady(WAIT);
            pg.execute(database, "INSERT INTO items SELECT g FROM generate_series(1, 10) g");
            await().atMost(WAIT).until(() -> items.messages().size() == 10);
            await().atMost(WAIT).until(() -> count(pg, database,
                    "SELECT count(*) FROM walhook.parked_event WHERE subscription = 'refused' AND address = 'refuse.items'") == 10);
            String lastId = (String) items.messages().get(9).getMessageId();
            await().atMost(WAIT).until(() -> count(pg, database, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"
                    + database + "' AND confirmed_flush_lsn > '" + lsnOf(lastId) + "'") == 1);
            assertThat(walhook.output()).contains("rejected");

            // the API's test-fire sends one message and reports the broker's outcome
            JsonNode fired = testFire(walhook, "config:good");
            assertThat(fired.get("delivered").asBoolean()).as(fired.toString()).isTrue();
            await().atMost(WAIT).until(() -> items.messages().size() == 11);
            Message test = items.messages().get(10);
            assertThat(test.getMessageId()).isEqualTo(fired.get("event_id").asText());
            assertThat(JSON.readTree(AmqpReceiver.body(test)).get("op").asText()).isEqualTo("test");
            JsonNode refused = testFire(walhook, "config:refused");
            assertThat(refused.get("delivered").asBoolean()).isFalse();
            assertThat(refused.get("error").asText()).startsWith("rejected: ").contains("refuse.items");

            // a subscription created through the API delivers to its own address from the next transaction
            java.net.http.HttpResponse<String> created = java.net.http.HttpClient.newHttpClient().send(
                    java.net.http.HttpRequest.newBuilder(walhook.uri("/subscriptions")).header("Authorization", "Bearer t")
                            .header("Content-Type", "application/json")
                            .POST(java.net.http.HttpRequest.BodyPublishers.ofString("{\"name\": \"fromapi\", \"tables\":"
                                    + " [\"public.items\"], \"destination\": {\"type\": \"amqp\", \"address\": \"api.{table}\"}}"))
                            .build(), java.net.http.HttpResponse.BodyHandlers.ofString());
            assertThat(created.statusCode()).as(created.body()).isEqualTo(201);
            assertThat(JSON.readTree(created.body()).at("/destination/address").asText()).isEqualTo("api.{table}");
            pg.execute(database, "INSERT INTO items VALUES (11)");
            try (AmqpReceiver api = AmqpReceiver.start("127.0.0.1", broker.port(), null, null, "api.items")) {
                try {
                    await().atMost(WAIT).until(() -> api.messages().size() == 1);
                } catch (org.awaitility.core.ConditionTimeoutException e) {
                    throw new AssertionError("nothing on api.items; walhook:\n" + walhook.output(), e);
                }
                assertThat(JSON.readTree(AmqpReceiver.body(api.messages().get(0))).at("/new/id").asInt()).isEqualTo(11);
            }
        }
    }

    private static JsonNode testFire(WalhookProcess walhook, String id) throws Exception {
        java.net.http.HttpResponse<String> response = java.net.http.HttpClient.newHttpClient().send(
                java.net.http.HttpRequest.newBuilder(walhook.uri("/subscriptions/" + id + "/test"))
                        .header("Authorization", "Bearer t").POST(java.net.http.HttpRequest.BodyPublishers.noBody()).build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).as(response.body()).isEqualTo(200);
        return JSON.readTree(response.body());
    }

    /** The commit LSN in an event id ({@code hex16(commit)-seq}) as pg_lsn text. */
    private static String lsnOf(String eventId) {
        long lsn = Long.parseUnsignedLong(eventId.substring(0, 16), 16);
        return Long.toHexString(lsn >>> 32).toUpperCase() + "/" + Long.toHexString(lsn & 0xFFFFFFFFL).toUpperCase();
    }

    private static Set<Integer> distinctRows(List<Message> messages) throws Exception {
        Set<Integer> rows = new TreeSet<>();
        for (Message m : messages) {
            rows.add(JSON.readTree(AmqpReceiver.body(m)).at("/new/id").asInt());
        }
        return rows;
    }

    private static long count(PostgresServer pg, String database, String query) throws Exception {
        try (Connection c = pg.connect(database); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(query)) {
            rs.next();
            return rs.getLong(1);
        }
    }
}
