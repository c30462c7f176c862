package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.matchesPattern;
import static org.hamcrest.Matchers.notNullValue;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.Map;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;

import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;
import io.quarkus.test.junit.QuarkusTest;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.PostgresTestResource;
import io.walhook.testing.TestPostgres;

/** walhook starts against a real PostgreSQL: its schema, health, status and API contract. */
@QuarkusTest
@QuarkusTestResource(value = ApplicationTest.Resource.class, restrictToAnnotatedClass = true)
@ExtendWith(OpenApiContract.class)
class ApplicationTest {

    private static final String TOKEN = "application-token";

    /** A database and the API token. */
    public static class Resource implements QuarkusTestResourceLifecycleManager {
        private final PostgresTestResource postgres = new PostgresTestResource();

        @Override
        public Map<String, String> start() {
            Map<String, String> config = new java.util.HashMap<>(postgres.start());
            config.put("walhook.api-token", TOKEN);
            return config;
        }

        @Override
        public void stop() {
            postgres.stop();
        }
    }

    @ConfigProperty(name = "quarkus.datasource.jdbc.url")
    String jdbcUrl;

    @Test
    void migratesItsOwnSchemaFromTheSourceUrl() throws Exception {
        PostgresServer server = TestPostgres.shared();
        String database = jdbcUrl.substring(jdbcUrl.lastIndexOf('/') + 1);
        try (Connection c = server.connect(database); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT to_regclass('walhook.checkpoint') IS NOT NULL,"
                     + " (SELECT max(version::int)::text FROM walhook.flyway_schema_history)")) {
            rs.next();
            assertThat(rs.getBoolean(1)).isTrue();
            assertThat(rs.getString(2)).isEqualTo(latestMigration());
        }
    }

    /** The highest version among the migrations in src/main/resources/db/migration. */
    private static String latestMigration() throws java.io.IOException {
        try (var files = java.nio.file.Files.list(java.nio.file.Path.of("src/main/resources/db/migration"))) {
            return Integer.toString(files.map(f -> f.getFileName().toString())
                    .filter(n -> n.matches("V\\d+__.*\\.sql")).mapToInt(n -> Integer.parseInt(n.substring(1, n.indexOf("__"))))
                    .max().orElseThrow());
        }
    }

    @Test
    void isReadyOnceTheReplicationStreamRuns() {
        await().atMost(Duration.ofSeconds(30)).untilAsserted(() ->
                given().get("/q/health/ready").then().statusCode(200).body("status", equalTo("UP")));
        given().get("/q/health/ready").then().body("checks.find { it.name == 'replication' }.data.state",
                equalTo("STREAMING"))
                // readiness is walhook's own check: no datasource check opening connections on each probe
                .body("checks.name", org.hamcrest.Matchers.contains("replication"));
        given().get("/q/health/live").then().statusCode(200).body("status", equalTo("UP"));
    }

    @Test
    void reportsTheSlotItCreatedAndItsStream() {
        await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().header("Authorization", "Bearer " + TOKEN)
                .get("/status").then().statusCode(200)
                .contentType("application/json")
                .body("slot.name", equalTo(jdbcUrl.substring(jdbcUrl.lastIndexOf('/') + 1)))
                .body("slot.exists", equalTo(true))
                .body("slot.active", equalTo(true))
                .body("server_lsn", matchesPattern("[0-9A-F]{1,8}/[0-9A-F]{1,8}"))
                .body("lag_bytes", notNullValue())
                .body("replication.state", equalTo("STREAMING"))
                .body("subscriptions.size()", equalTo(0)));
    }

    @Test
    void servesOpenapiYamlAsTheContract() throws Exception {
        byte[] served = given().get("/q/openapi").then().statusCode(200)
                .contentType("application/yaml").extract().asByteArray();
        assertThat(served).as("openapi.yaml as written").isEqualTo(java.nio.file.Files.readAllBytes(
                java.nio.file.Path.of("openapi.yaml")));
        given().get("/q/openapi?format=yaml").then().statusCode(200).contentType("application/yaml");
        given().get("/q/openapi?format=YAML").then().statusCode(200).contentType("application/yaml");
        // as Quarkus's own endpoint does: JSON by format=json, or by an Accept that asks for JSON
        java.util.Map<?, ?> yaml = new org.yaml.snakeyaml.Yaml().load(new String(served, java.nio.charset.StandardCharsets.UTF_8));
        com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
        byte[] asJson = given().get("/q/openapi?format=json").then().statusCode(200).contentType("application/json")
                .extract().asByteArray();
        assertThat(json.readTree(asJson)).as("the same document").isEqualTo(json.valueToTree(yaml));
        assertThat(given().accept("application/json").get("/q/openapi").then().statusCode(200)
                .contentType("application/json").extract().asByteArray()).isEqualTo(asJson);
        given().get("/q/openapi?format=xml").then().statusCode(400).contentType("application/problem+json")
                .body("field", equalTo("format"));
    }

    @Test
    void exposesPrometheusMetricsOfTheReplicationStream() {
        await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> given().get("/q/metrics").then().statusCode(200)
                .body(containsString("walhook_replication_streaming 1.0"))
                .body(containsString("walhook_replication_slot_invalid 0.0"))
                .body(containsString("walhook_replication_events_total"))
                .body(containsString("jvm_memory_used_bytes")));
    }

    /**
     * The metrics need no token: a request path refused before it reached a route (no token, a
     * wrong one, a target not percent-encoded) was kept as a label of the HTTP server's metrics as
     * it came, for anyone to read, a token a client put in it included, and with no bound on how
     * many such series a caller could add.
     */
    @Test
    void aRefusedRequestsPathIsNotKeptInTheMetrics() throws Exception {
        // paths the contract does not have: not checked against it
        given().noFilters().get("/status/ReadTok_Q8w7e6r5t4").then().statusCode(401);
        given().noFilters().header("Authorization", "Bearer wrong").get("/subscriptions/HdrTok_Alpha_1234").then().statusCode(401);
        try (java.net.Socket socket = new java.net.Socket("127.0.0.1", io.restassured.RestAssured.port)) {
            socket.getOutputStream().write(("GET /subscriptions/ApiTok_Main_5f3a9c1e7b%zz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + "Connection: close\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
            assertThat(new String(socket.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8))
                    .startsWith("HTTP/1.1 400");
        }
        String metrics = given().get("/q/metrics").then().statusCode(200).extract().asString();
        assertThat(metrics).contains("walhook_replication_events_total").doesNotContain("ReadTok_Q8w7e6r5t4")
                .doesNotContain("HdrTok_Alpha_1234").doesNotContain("ApiTok_Main_5f3a9c1e7b");
    }

    @Test
    void healthMetricsAndTheContractNeedNoToken() {
        given().get("/q/health/live").then().statusCode(200);
        given().get("/q/openapi").then().statusCode(200);
        given().filter(OpenApiContract.responsesOnly()).get("/status").then().statusCode(401)
                .contentType("application/problem+json").body("detail", containsString("Authorization: Bearer"));
    }
}
