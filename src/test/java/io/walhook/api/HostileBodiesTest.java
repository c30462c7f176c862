package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.Response;

/**
 * Thousands of malformed and hostile bodies against every write endpoint: only 4xx problems,
 * never a 5xx, and walhook stays healthy.
 */
@QuarkusTest
@QuarkusTestResource(value = SubscriptionApiTest.Resource.class, restrictToAnnotatedClass = true)
@ExtendWith(OpenApiContract.class)
class HostileBodiesTest {

    private static final String VALID = "{\"name\": \"n%d\", \"tables\": [\"public.t\"], \"operations\": [\"insert\"],"
            + " \"filter\": \"new.a > 1\", \"format\": \"json\", \"batch\": {\"max_events\": 1, \"max_wait_ms\": 0},"
            + " \"destination\": {\"type\": \"webhook\", \"url\": \"https://93.184.216.34/h\", \"headers\": {\"X\": \"y\"}}}";
    private static final String[] HOSTILE_VALUES = {
        "null", "true", "-1", "1e309", "99999999999999999999999999", "\"\"", "\"' OR 1=1 --\"", "\"${jndi:ldap://x}\"",
        "\"\\u0000\"", "\"\\ud800\"", "\"😀👍🏽\"", "[]", "{}", "[[[[[[[[]]]]]]]]", "\"../../etc/passwd\"",
        "\"<script>alert(1)</script>\"", "\"a\\nb\"", "\"" + "x".repeat(30_000) + "\"", "\"*\"", "\"public.*.*\"",
        "\"has(new.x) && \"", "\"new.a / 0 == 1\"", "\"javascript:alert(1)\"", "\"http://[::1]/\"", "\"http://169.254.169.254/\"",
        "\"http://0x7f.1/\"", "\"https://\"", "\"whsec_\"", "\"whsec_@@@\"", "{\"$ne\": 1}", "-0", "0.5",
    };

    /** Bodies built by breaking a valid subscription in many ways, and random bytes. */
    private static List<String> bodies() {
        Random random = new Random(20261129);
        List<String> bodies = new ArrayList<>();
        String valid = VALID.formatted(0);
        String[] fields = {"name", "tables", "operations", "filter", "format", "batch", "destination"};
        for (String field : fields) {
            for (String value : HOSTILE_VALUES) {
                bodies.add(valid.replaceFirst("\"" + field + "\": (\\[[^\\]]*\\]|\\{[^}]*\\}\\}?|\"[^\"]*\")",
                        "\"" + field + "\": " + java.util.regex.Matcher.quoteReplacement(value)));
            }
        }
        for (String value : HOSTILE_VALUES) {
            bodies.add(valid.replace("\"url\": \"https://93.184.216.34/h\"", "\"url\": " + value));
            bodies.add(valid.replace("\"X\": \"y\"", "\"X\": " + value));
            bodies.add(value);
            // fields whose strings are stored as they come: a NUL in one reached PostgreSQL's jsonb (a 500)
            bodies.add(valid.replace("\"format\": \"json\"", "\"format\": \"json\", \"columns\": {\"include\": [" + value + "]}"));
            bodies.add(valid.replace("\"format\": \"json\"", "\"format\": \"json\", \"columns\": {\"exclude\": [\"a\", " + value + "]}"));
        }
        bodies.add(valid.replace("\"new.a > 1\"", "\"new.s == '\\u0000'\""));
        bodies.add("[".repeat(10_000) + "]".repeat(10_000));
        bodies.add("{\"a\":".repeat(5_000) + "1" + "}".repeat(5_000));
        bodies.add("");
        bodies.add("{\"name\": \"x\"" + ", \"name\": \"y\"".repeat(1000) + "}");
        while (bodies.size() < 1500) {
            int cut = random.nextInt(valid.length());
            switch (random.nextInt(4)) {
                case 0 -> bodies.add(valid.substring(0, cut));
                case 1 -> bodies.add(valid.substring(0, cut) + (char) random.nextInt(0x3000) + valid.substring(cut));
                case 2 -> {
                    byte[] noise = new byte[random.nextInt(200)];
                    random.nextBytes(noise);
                    bodies.add(new String(noise, StandardCharsets.ISO_8859_1));
                }
                default -> bodies.add(valid.substring(0, cut) + valid.substring(Math.min(valid.length(), cut + 1 + random.nextInt(20))));
            }
        }
        return bodies;
    }

    @Test
    void noBodyCausesA5xxAndWalhookStaysHealthy() {
        String existing = given().header("Authorization", "Bearer s3cret-token").contentType("application/json")
                .body(VALID.formatted(999_999)).post("/subscriptions").then().statusCode(201).extract().path("id");
        List<String> failures = new ArrayList<>();
        int accepted = 0;
        for (String body : bodies()) {
            for (String target : List.of("/subscriptions", "/subscriptions/" + existing)) {
                Response response = given().filter(OpenApiContract.responsesOnly())
                        .header("Authorization", "Bearer s3cret-token").contentType("application/json")
                        .body(body.getBytes(StandardCharsets.UTF_8))
                        .request(target.equals("/subscriptions") ? "POST" : "PUT", target);
                int status = response.statusCode();
                if (status >= 200 && status < 300) {
                    accepted++;
                    String id = response.path("id");
                    if (target.equals("/subscriptions") && id != null) {
                        given().header("Authorization", "Bearer s3cret-token").delete("/subscriptions/" + id);
                    }
                } else if (status < 400 || status >= 500 || !response.contentType().startsWith(ApiProblem.MEDIA_TYPE)) {
                    failures.add(status + " " + response.contentType() + " for " + abbreviate(body));
                }
            }
        }
        assertThat(failures).isEmpty();
        assertThat(accepted).as("a few mutations stay valid subscriptions").isLessThan(500);
        given().get("/q/health/live").then().statusCode(200);
        given().get("/q/health/ready").then().statusCode(200);
    }

    private static String abbreviate(String body) {
        return body.length() > 120 ? body.substring(0, 120) + "..." : body;
    }
}
