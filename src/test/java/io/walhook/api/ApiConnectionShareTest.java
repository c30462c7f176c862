package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.junit.QuarkusTest;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WebhookReceiver;

/**
 * The management API's requests cannot take the connections delivery needs: API requests stuck in
 * the database (behind a lock, on a large queue) used to hold every connection of the one pool,
 * and the slot stopped advancing, parked events stopped being written, until they ended.
 */
@QuarkusTest
// a database, a token, and private destinations allowed (the receiver is on 127.0.0.1)
@QuarkusTestResource(value = SubscriptionApiDeliveryTest.Resource.class, restrictToAnnotatedClass = true)
@org.junit.jupiter.api.extension.ExtendWith(OpenApiContract.class)
class ApiConnectionShareTest {

    @ConfigProperty(name = "quarkus.datasource.jdbc.url")
    String jdbcUrl;

    private Connection connect() throws Exception {
        return TestPostgres.shared().connect(database());
    }

    private String database() {
        return jdbcUrl.substring(jdbcUrl.lastIndexOf('/') + 1);
    }

    private void sql(String statement) throws Exception {
        try (Connection c = connect(); Statement s = c.createStatement()) {
            s.execute(statement);
        }
    }

    private String text(String query) throws Exception {
        try (Connection c = connect(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(query)) {
            rs.next();
            return rs.getString(1);
        }
    }

    private static String create(String body) {
        return given().header("Authorization", "Bearer t").contentType("application/json").body(body)
                .post("/subscriptions").then().statusCode(201).extract().path("id");
    }

    /** A subscription of public.{name}_rows to {@code url}. */
    private static String webhook(String name, String url) {
        return create("{\"name\": \"" + name + "\", \"tables\": [\"public." + name + "_rows\"], \"destination\":"
                + " {\"type\": \"webhook\", \"url\": \"" + url + "\"}}");
    }

    /** Six requests at once, once at least two of them wait for a lock in the database. */
    private List<CompletableFuture<Integer>> sixStuck(ExecutorService clients, java.util.function.Supplier<Integer> request) {
        List<CompletableFuture<Integer>> requests = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            requests.add(CompletableFuture.supplyAsync(request, clients));
        }
        await().atMost(Duration.ofSeconds(30)).until(() -> Integer.parseInt(text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")) >= 2);
        return requests;
    }

    @Test
    void apiRequestsStuckInTheDatabaseLeaveDeliveryItsConnections() throws Exception {
        sql("CREATE TABLE held_rows (id int PRIMARY KEY)");
        sql("CREATE TABLE flowing_rows (id int PRIMARY KEY)");
        ExecutorService clients = Executors.newFixedThreadPool(6);
        try (WebhookReceiver receiver = WebhookReceiver.start(); Connection locker = connect()) {
            String held = webhook("held", receiver.url("/held"));
            webhook("flowing", receiver.url("/flowing"));
            given().header("Authorization", "Bearer t").post("/subscriptions/" + held + "/pause").then().statusCode(200);
            sql("INSERT INTO held_rows VALUES (1), (2), (3)");
            await().atMost(Duration.ofSeconds(30)).until(() -> "3".equals(text(
                    "SELECT count(*) FROM walhook.parked_event WHERE subscription_id = '" + held + "'")));

            // an operator's session holds the held subscription's queue; six scripts drop its rows by id meanwhile
            // (dropping the whole queue skips the rows held, holding no connection while it waits for them)
            String ids = text("SELECT string_agg('id=' || id, '&') FROM walhook.parked_event WHERE subscription_id = '"
                    + held + "'");
            locker.setAutoCommit(false);
            try (Statement s = locker.createStatement()) {
                s.execute("SELECT id FROM walhook.parked_event WHERE subscription_id = '" + held + "' FOR UPDATE");
            }
            List<CompletableFuture<Integer>> drops = sixStuck(clients, () -> given().header("Authorization", "Bearer t")
                    .delete("/subscriptions/" + held + "/dead-letters?" + ids).then().extract().statusCode());

            // changes of another subscription are still delivered, and the slot still advances past them
            sql("INSERT INTO flowing_rows VALUES (1)");
            String written = text("SELECT pg_current_wal_lsn()");
            sql("INSERT INTO held_rows VALUES (4)"); // parked: the held subscription is paused
            await().atMost(Duration.ofSeconds(20)).until(() -> receiver.requests("/flowing").size() == 1);
            await().atMost(Duration.ofSeconds(20)).until(() -> "t".equals(text("SELECT confirmed_flush_lsn >= '" + written
                    + "'::pg_lsn FROM pg_replication_slots WHERE slot_name = '" + database() + "'")));
            await().atMost(Duration.ofSeconds(20)).until(() -> "4".equals(text(
                    "SELECT count(*) FROM walhook.parked_event WHERE subscription_id = '" + held + "'")));

            // the requests that found no connection free were told to retry; none failed otherwise
            locker.rollback();
            List<Integer> statuses = new ArrayList<>();
            for (CompletableFuture<Integer> drop : drops) {
                statuses.add(drop.get(60, java.util.concurrent.TimeUnit.SECONDS));
            }
            assertThat(statuses).allMatch(status -> status == 200 || status == 503);
            assertThat(receiver.requests("/held")).isEmpty();
        } finally {
            clients.shutdownNow();
        }
    }
    /** The same for the backfill endpoints: they went through delivery's pool, not the API's. */
    @Test
    void backfillRequestsStuckInTheDatabaseLeaveDeliveryItsConnections() throws Exception {
        sql("CREATE TABLE filled_rows (id int PRIMARY KEY)");
        sql("CREATE TABLE passing_rows (id int PRIMARY KEY)");
        sql("INSERT INTO filled_rows SELECT generate_series(1, 50)");
        ExecutorService clients = Executors.newFixedThreadPool(6);
        try (WebhookReceiver receiver = WebhookReceiver.start(); Connection locker = connect()) {
            String filled = webhook("filled", receiver.url("/filled"));
            webhook("passing", receiver.url("/passing"));
            String backfill = given().header("Authorization", "Bearer t").contentType("application/json")
                    .body("{\"max_rows_per_second\": 1}").post("/subscriptions/" + filled + "/backfills")
                    .then().statusCode(202).extract().path("id");
            String path = "/subscriptions/" + filled + "/backfills/" + backfill;
            given().header("Authorization", "Bearer t").post(path + "/pause").then().statusCode(200);

            // an operator's session holds the paused backfill's row; six scripts resume it meanwhile
            locker.setAutoCommit(false);
            try (Statement s = locker.createStatement()) {
                s.execute("SELECT id FROM walhook.backfill WHERE id = '" + backfill + "' FOR UPDATE");
            }
            List<CompletableFuture<Integer>> resumes = sixStuck(clients, () -> given().header("Authorization", "Bearer t")
                    .post(path + "/resume").then().extract().statusCode());

            // changes of another subscription are still delivered, and the slot still advances past them
            sql("INSERT INTO passing_rows VALUES (1)");
            String written = text("SELECT pg_current_wal_lsn()");
            await().atMost(Duration.ofSeconds(20)).until(() -> receiver.requests("/passing").size() == 1);
            await().atMost(Duration.ofSeconds(20)).until(() -> "t".equals(text("SELECT confirmed_flush_lsn >= '" + written
                    + "'::pg_lsn FROM pg_replication_slots WHERE slot_name = '" + database() + "'")));

            locker.rollback();
            List<Integer> statuses = new ArrayList<>();
            for (CompletableFuture<Integer> resume : resumes) {
                statuses.add(resume.get(60, java.util.concurrent.TimeUnit.SECONDS));
            }
            assertThat(statuses).allMatch(status -> status == 200 || status == 503).contains(200);
            given().header("Authorization", "Bearer t").get(path).then().statusCode(200);
        } finally {
            clients.shutdownNow();
        }
    }
}
