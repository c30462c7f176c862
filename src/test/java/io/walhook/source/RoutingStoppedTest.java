package io.walhook.source;

import static io.restassured.RestAssured.given;
import static org.awaitility.Awaitility.await;
import static org.hamcrest.Matchers.equalTo;

import java.time.Duration;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;
import io.quarkus.test.junit.QuarkusTest;
import io.walhook.testing.PostgresTestResource;

/** Readiness goes DOWN when the routing thread dies: nothing would be delivered or acknowledged any more. */
@QuarkusTest
@QuarkusTestResource(value = RoutingStoppedTest.Resource.class, restrictToAnnotatedClass = true)
class RoutingStoppedTest {

    /** A database of its own: this test stops the application's routing for good. */
    public static class Resource implements QuarkusTestResourceLifecycleManager {
        private final PostgresTestResource postgres = new PostgresTestResource();

        @Override
        public Map<String, String> start() {
            Map<String, String> config = new java.util.HashMap<>(postgres.start());
            config.put("walhook.api-token", "t");
            return config;
        }

        @Override
        public void stop() {
            postgres.stop();
        }
    }

    @Test
    void readinessIsDownOnceRoutingStops() {
        await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> given().get("/q/health/ready").then().statusCode(200));
        Thread routing = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("walhook-routing"))
                .findFirst().orElseThrow(() -> new AssertionError("no walhook-routing thread"));
        routing.interrupt();
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> given().get("/q/health/ready").then().statusCode(503)
                .body("checks.find { it.name == 'replication' }.data.state", equalTo("ROUTING_STOPPED"))
                .body("checks.find { it.name == 'replication' }.data", org.hamcrest.Matchers.not(
                        org.hamcrest.Matchers.hasKey("last_error"))));
        // the reason is for the token's holders
        given().header("Authorization", "Bearer t").get("/status").then().statusCode(200)
                .body("replication.state", equalTo("ROUTING_STOPPED"))
                .body("replication.last_error", org.hamcrest.Matchers.notNullValue());
    }
}
