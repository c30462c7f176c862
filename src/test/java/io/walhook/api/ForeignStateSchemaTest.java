package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;

import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.junit.QuarkusTest;
import io.walhook.config.SchemaMigrations;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WebhookReceiver;

/**
 * Two walhook deployments on one database whose publications both publish every table (each
 * {@code FOR ALL TABLES}, the default): each streams the other's state tables too. Before, this
 * one sent the other's subscriptions, secrets and header values included, as events to its own
 * {@code *} subscriptions, and backfilled them on request. Now it skips any schema holding a
 * walhook deployment's state, found when the stream first meets one of its tables.
 */
@QuarkusTest
// a database, a token, and private destinations allowed (the receiver is on 127.0.0.1)
@QuarkusTestResource(value = SubscriptionApiDeliveryTest.Resource.class, restrictToAnnotatedClass = true)
@org.junit.jupiter.api.extension.ExtendWith(OpenApiContract.class)
class ForeignStateSchemaTest {

    private static final String SECRET = "whsec_Zm9yZWlnbi1zZWNyZXQ";

    @ConfigProperty(name = "quarkus.datasource.jdbc.url")
    String jdbcUrl;

    private Connection connect() throws Exception {
        return TestPostgres.shared().connect(jdbcUrl.substring(jdbcUrl.lastIndexOf('/') + 1));
    }

    private void sql(String statement) throws Exception {
        try (Connection c = connect(); Statement s = c.createStatement()) {
            s.execute(statement);
        }
    }

    private static io.restassured.specification.RequestSpecification authorized() {
        return given().header("Authorization", "Bearer t").contentType("application/json");
    }

    @Test
    void anotherDeploymentsStateIsNeitherStreamedNorBackfilled() throws Exception {
        sql("CREATE TABLE fs_orders (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            String id = authorized().body("{\"name\": \"everything\", \"destination\": {\"type\": \"webhook\", \"url\": \""
                    + receiver.url("/all") + "\"}}").post("/subscriptions").then().statusCode(201).extract().path("id");
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().get("/q/metrics").then().statusCode(200)
                    .body(org.hamcrest.Matchers.matchesPattern("(?s).*walhook_delivery_routed_total\\{subscription=\"everything\".*")));

            // another deployment starts on the same database, with a schema of its own, and is given a subscription
            org.postgresql.ds.PGSimpleDataSource other = new org.postgresql.ds.PGSimpleDataSource();
            try (Connection c = connect()) {
                other.setURL(c.getMetaData().getURL());
                other.setUser(c.getMetaData().getUserName());
            }
            SchemaMigrations.migrate(other, "walhook_other");
            // the first of its tables the stream meets may be any of them (here one of its latest)
            sql("INSERT INTO walhook_other.dropped_event VALUES ('tenant', 'dropped-1', '0/1')");
            sql("INSERT INTO walhook_other.subscription (id, name, body) VALUES (gen_random_uuid(), 'tenant',"
                    + " '{\"destination\": {\"type\": \"webhook\", \"url\": \"https://example.com/\", \"secret\": \"" + SECRET
                    + "\"}}')");
            sql("INSERT INTO fs_orders VALUES (1)");

            await().atMost(Duration.ofSeconds(30)).until(() -> receiver.requests("/all").stream()
                    .anyMatch(r -> r.body().contains("\"table\":\"fs_orders\"")));
            // its history's first rows may come before its schema is complete, and are sent: they hold no credential
            await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(
                    receiver.requests("/all")).extracting(WebhookReceiver.Request::body)
                    .noneMatch(body -> body.contains(SECRET) || body.contains("\"schema\":\"walhook_other\"")
                            && !body.contains("\"table\":\"flyway_schema_history\"")));

            // nor backfilled: asked for by name, refused; every published table, left out
            authorized().body("{\"tables\": [\"walhook_other.subscription\"]}").post("/subscriptions/" + id + "/backfills")
                    .then().statusCode(400).body("field", equalTo("/tables/0"))
                    .body("detail", containsString("another walhook deployment's state"));
            String backfill = authorized().post("/subscriptions/" + id + "/backfills").then().statusCode(202)
                    .extract().path("id");
            await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> authorized()
                    .get("/subscriptions/" + id + "/backfills/" + backfill).then().statusCode(200).body("state", equalTo("done")));
            assertThat(receiver.requests("/all")).as("a backfill row of fs_orders, and nothing of the other deployment")
                    .anyMatch(r -> r.body().contains("\"table\":\"fs_orders\"") && r.body().contains("\"op\":\"read\""))
                    .noneMatch(r -> r.body().contains(SECRET) || r.body().contains("\"op\":\"read\"")
                            && r.body().contains("\"schema\":\"walhook_other\""));
        }
    }
}
