package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;
import static org.hamcrest.Matchers.contains;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.hasItem;
import static org.hamcrest.Matchers.not;
import static org.hamcrest.Matchers.startsWith;

import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.specification.RequestSpecification;
import io.walhook.testing.PostgresTestResource;

/** The subscription API with a token and a read token configured and private destinations refused (the default). */
@QuarkusTest
@QuarkusTestResource(value = SubscriptionApiTest.Resource.class, restrictToAnnotatedClass = true)
@ExtendWith(OpenApiContract.class)
class SubscriptionApiTest {

    static final String TOKEN = "s3cret-token";
    static final String READ_TOKEN = "re4d-only-token";
    private static final String BODY = "{\"name\": \"orders\", \"tables\": [\"public.orders\"], \"operations\": [\"insert\"],"
            + " \"destination\": {\"type\": \"webhook\", \"url\": \"https://93.184.216.34/hook\","
            + " \"secret\": \"whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=\"}}";

    /** A database, the tokens, and one configured subscription that matches nothing. */
    public static class Resource implements QuarkusTestResourceLifecycleManager {
        private final PostgresTestResource postgres = new PostgresTestResource();

        @Override
        public Map<String, String> start() {
            Map<String, String> config = new java.util.HashMap<>(postgres.start());
            config.put("walhook.api-token", TOKEN);
            config.put("walhook.api-read-token", READ_TOKEN);
            config.put("walhook.subscriptions.cfg.url", "https://93.184.216.34/cfg");
            config.put("walhook.subscriptions.cfg.tables", "nomatch.nomatch");
            config.put("walhook.subscriptions.cfg.retry-max-attempts", "3");
            config.put("walhook.subscriptions.cfg.retry-window", "2m");
            return config;
        }

        @Override
        public void stop() {
            postgres.stop();
        }
    }

    private static RequestSpecification authorized() {
        return given().header("Authorization", "Bearer " + TOKEN).contentType("application/json");
    }

    /** A request openapi.yaml itself rules out: only the answer is checked against it. */
    private static RequestSpecification invalidRequest() {
        return given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + TOKEN);
    }

    private static RequestSpecification reader() {
        return given().header("Authorization", "Bearer " + READ_TOKEN);
    }

    @Test
    void createsReadsReplacesAndDeletesWithoutEverReturningTheSecret() {
        String id = authorized().body(BODY).post("/subscriptions").then().statusCode(201)
                .header("Location", containsString("/subscriptions/"))
                .body("name", equalTo("orders"))
                .body("read_only", equalTo(false))
                .body("destination.secret_set", equalTo(true))
                .body(not(containsString("whsec_")))
                .extract().path("id");
        authorized().get("/subscriptions").then().statusCode(200)
                .body("id", hasItem(id)).body("id", hasItem("config:cfg")).body(not(containsString("whsec_")));
        authorized().get("/subscriptions/" + id).then().statusCode(200).body("tables[0]", equalTo("public.orders"));
        authorized().body(BODY.replace("public.orders", "public.*")).put("/subscriptions/" + id).then().statusCode(200)
                .body("tables[0]", equalTo("public.*"));
        authorized().delete("/subscriptions/" + id).then().statusCode(200).body("discarded_events", equalTo(0));
        authorized().get("/subscriptions/" + id).then().statusCode(404).contentType(ApiProblem.MEDIA_TYPE)
                .body("status", equalTo(404));
    }

    @Test
    void writesNeedTheBearerToken() {
        given().filter(OpenApiContract.responsesOnly()).contentType("application/json").body(BODY).post("/subscriptions")
                .then().statusCode(401)
                .header("WWW-Authenticate", startsWith("Bearer"))
                .contentType(ApiProblem.MEDIA_TYPE).body("detail", containsString("Authorization: Bearer"));
        given().header("Authorization", "Bearer wrong").contentType("application/json").body(BODY)
                .post("/subscriptions").then().statusCode(401).body("detail", containsString("not WALHOOK_API_TOKEN"));
    }

    @Test
    void readsNeedTheBearerTokenToo() {
        for (String path : List.of("/subscriptions", "/subscriptions/config:cfg", "/subscriptions/config:cfg/dead-letters",
                "/status", "/subscriptions/no-such-one")) {
            given().filter(OpenApiContract.responsesOnly()).get(path).then().statusCode(401)
                    .header("WWW-Authenticate", startsWith("Bearer"))
                    .contentType(ApiProblem.MEDIA_TYPE).body("detail", containsString("Authorization: Bearer"));
            given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + TOKEN + "x").get(path)
                    .then().statusCode(401).contentType(ApiProblem.MEDIA_TYPE);
            given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Basic " + TOKEN).get(path)
                    .then().statusCode(401).contentType(ApiProblem.MEDIA_TYPE);
        }
        authorized().get("/status").then().statusCode(200);
    }

    @Test
    void theReadTokenGrantsReadsOnly() {
        String id = authorized().body(BODY.replace("\"orders\"", "\"readable\"")).post("/subscriptions").then()
                .statusCode(201).extract().path("id");
        reader().get("/subscriptions").then().statusCode(200).body("id", hasItem(id));
        reader().get("/subscriptions/" + id).then().statusCode(200);
        reader().get("/subscriptions/" + id + "/dead-letters").then().statusCode(200);
        reader().get("/status").then().statusCode(200);
        reader().contentType("application/json").body(BODY.replace("\"orders\"", "\"unwritten\"")).post("/subscriptions")
                .then().statusCode(403).contentType(ApiProblem.MEDIA_TYPE).body("detail", containsString("WALHOOK_API_READ_TOKEN"));
        reader().contentType("application/json").body(BODY).put("/subscriptions/" + id).then().statusCode(403);
        for (String[] write : new String[][] {{"DELETE", ""}, {"POST", "/pause"}, {"POST", "/resume"}, {"POST", "/test"},
                {"POST", "/dead-letters/replay"}, {"DELETE", "/dead-letters"}}) {
            reader().request(write[0], "/subscriptions/" + id + write[1]).then().statusCode(403)
                    .contentType(ApiProblem.MEDIA_TYPE);
        }
        reader().get("/subscriptions/" + id).then().statusCode(200).body("paused", equalTo(false))
                .body("name", equalTo("readable"));
        authorized().delete("/subscriptions/" + id).then().statusCode(200);
    }

    @Test
    void healthMetricsAndTheContractStayOpen() {
        given().get("/q/health/live").then().statusCode(200);
        given().get("/q/health/ready").then().statusCode(org.hamcrest.Matchers.anyOf(equalTo(200), equalTo(503)));
        given().get("/q/metrics").then().statusCode(200);
        given().get("/q/openapi").then().statusCode(200);
    }

    /** Header values and a URL's query string are the destination's credentials: written, never shown. */
    @Test
    void headerValuesAndTheUrlQueryAreWriteOnly() {
        String body = BODY.replace("\"orders\"", "\"headed\"").replace("/hook\"", "/hook?token=qu3ry-s3cret\","
                + " \"headers\": {\"X-Api-Key\": \"h3ader-s3cret\", \"Accept-Language\": \"la-ng-value\"}");
        String id = authorized().body(body).post("/subscriptions").then().statusCode(201)
                .body("destination.headers_set", contains("Accept-Language", "X-Api-Key"))
                .body("destination.url", equalTo("https://93.184.216.34/hook"))
                .body(not(containsString("s3cret"))).body(not(containsString("la-ng-value")))
                .extract().path("id");
        authorized().get("/subscriptions/" + id).then().statusCode(200)
                .body("destination.headers_set", contains("Accept-Language", "X-Api-Key"))
                .body("destination", not(org.hamcrest.Matchers.hasKey("headers")))
                .body(not(containsString("s3cret"))).body(not(containsString("la-ng-value")));
        authorized().get("/subscriptions").then().statusCode(200).body(not(containsString("s3cret")));
        authorized().body(body.replace(", \"Accept-Language\": \"la-ng-value\"", "")).put("/subscriptions/" + id).then()
                .statusCode(200).body("destination.headers_set", contains("X-Api-Key"));
        authorized().body(BODY.replace("\"orders\"", "\"headed\"")).put("/subscriptions/" + id).then()
                .statusCode(200).body("destination.headers_set", org.hamcrest.Matchers.empty());
        authorized().delete("/subscriptions/" + id).then().statusCode(200);
    }

    @Test
    void theListPagesWithALinkToTheNextPageAndRefusesACursorThatNamesNothing() {
        java.util.List<String> created = new java.util.ArrayList<>();
        for (int i = 0; i < 5; i++) {
            created.add(authorized().body(BODY.replace("\"orders\"", "\"paged-" + i + "\"")).post("/subscriptions")
                    .then().statusCode(201).extract().path("id"));
        }
        try {
            java.util.List<String> all = authorized().get("/subscriptions").then().statusCode(200)
                    .header("Link", org.hamcrest.Matchers.nullValue()).extract().path("id");
            assertThat(all).startsWith("config:cfg").containsSubsequence(created);
            // pages of two, following the Link header, give the same list
            java.util.List<String> paged = new java.util.ArrayList<>();
            String next = "/subscriptions?limit=2";
            int pages = 0;
            while (next != null) {
                io.restassured.response.Response page = authorized().get(next);
                page.then().statusCode(200);
                java.util.List<String> ids = page.path("id");
                assertThat(ids).hasSizeLessThanOrEqualTo(2).isNotEmpty();
                paged.addAll(ids);
                String link = page.header("Link");
                next = link == null ? null : link.substring(1, link.indexOf('>'));
                assertThat(link == null || link.endsWith("; rel=\"next\"")).as(link).isTrue();
                pages++;
            }
            assertThat(paged).isEqualTo(all);
            assertThat(pages).isEqualTo((all.size() + 1) / 2);

            // the last one of a page deleted before the next page is asked for: the next goes on from its place (it was
            // a 400, and a client paging through thousands of tenants had to start again whenever one left)
            int at = all.indexOf(created.get(1));
            io.restassured.response.Response page = authorized().get("/subscriptions?limit=" + (at + 1));
            assertThat(page.<java.util.List<String>>path("id")).endsWith(created.get(1));
            String link = page.header("Link");
            authorized().delete("/subscriptions/" + created.get(1)).then().statusCode(200);
            assertThat(authorized().get(link.substring(1, link.indexOf('>'))).then().statusCode(200).extract()
                    .<java.util.List<String>>path("id")).startsWith(created.get(2), created.get(3));
            created.remove(1);
            invalidRequest().get("/subscriptions?limit=2&after_created=5").then().statusCode(400)
                    .body("field", equalTo("after_created"));

            invalidRequest().get("/subscriptions?limit=0").then().statusCode(400).body("field", equalTo("limit"));
            invalidRequest().get("/subscriptions?limit=1001").then().statusCode(400).body("field", equalTo("limit"));
            authorized().get("/subscriptions?after=config:cfg").then().statusCode(400).body("field", equalTo("after"));
            authorized().get("/subscriptions?limit=2&after=" + java.util.UUID.randomUUID()).then().statusCode(400)
                    .body("field", equalTo("after")).body("detail", containsString("names no subscription"));
            invalidRequest().get("/subscriptions?limit=2&page=2").then().statusCode(400).body("field", equalTo("page"));
        } finally {
            created.forEach(id -> authorized().delete("/subscriptions/" + id).then().statusCode(200));
        }
    }

    @Test
    void configuredSubscriptionsAreReadOnly() {
        authorized().get("/subscriptions/config:cfg").then().statusCode(200).body("read_only", equalTo(true));
        authorized().body(BODY).put("/subscriptions/config:cfg").then().statusCode(409)
                .body("detail", containsString("WALHOOK_SUBSCRIPTIONS_"));
        authorized().delete("/subscriptions/config:cfg").then().statusCode(409);
        authorized().body(BODY.replace("\"orders\"", "\"cfg\"")).post("/subscriptions").then().statusCode(409)
                .body("field", equalTo("/name"));
    }

    @org.eclipse.microprofile.config.inject.ConfigProperty(name = "quarkus.datasource.jdbc.url")
    String jdbcUrl;

    /**
     * Two writes of one name at once (a client retrying a POST that timed out): both found the name
     * free, and the second one's insert met the unique index: a 500 and a stack trace in the log. A
     * transaction holding the name uncommitted while the request is written makes the race certain.
     */
    @Test
    void aNameTakenByAnotherWriteAtTheSameTimeIsAConflict() throws Exception {
        String database = jdbcUrl.substring(jdbcUrl.lastIndexOf('/') + 1);
        String body = BODY.replace("\"orders\"", "\"raced\"");
        try (java.sql.Connection other = io.walhook.testing.TestPostgres.shared().connect(database)) {
            other.setAutoCommit(false);
            try (java.sql.Statement s = other.createStatement()) {
                s.execute("INSERT INTO walhook.subscription (id, name, body) VALUES (gen_random_uuid(), 'raced', '{}')");
            }
            java.util.concurrent.CompletableFuture<io.restassured.response.Response> written =
                    java.util.concurrent.CompletableFuture.supplyAsync(() -> authorized().body(body).post("/subscriptions"));
            // the request's insert waits on the other transaction's row
            org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(30)).until(() -> {
                try (java.sql.Connection look = io.walhook.testing.TestPostgres.shared().connect(database);
                        java.sql.Statement s = look.createStatement();
                        java.sql.ResultSet rs = s.executeQuery("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                + " AND datname = current_database()")) {
                    rs.next();
                    return rs.getInt(1) > 0 || written.isDone();
                }
            });
            other.commit();
            io.restassured.response.Response response = written.get(30, java.util.concurrent.TimeUnit.SECONDS);
            assertThat(response.statusCode()).as(response.asString()).isEqualTo(409);
            assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
            assertThat(response.jsonPath().getString("field")).isEqualTo("/name");
            assertThat(response.jsonPath().getString("detail")).contains("raced");
        }
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "{nope                                                                               | ''",
        "{\"name\": \"x\", \"extra\": 1}                                                     | /extra",
        "{\"name\": \"x\", \"destination\": {\"type\": \"webhook\", \"url\": \"ftp://h/\"}}    | /destination/url",
        "{\"name\": \"x\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:9/\"}} | /destination/url",
        "{\"name\": \"x\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://10.1.2.3/\"}}   | /destination/url",
        // IPv4 inside IPv6 (NAT64, 6to4) and other reserved ranges: refused when written, as when connected to
        "{\"name\": \"x\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://[64:ff9b::a9fe:a9fe]/\"}} | /destination/url",
        "{\"name\": \"x\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://[2002:7f00:1::1]/\"}} | /destination/url",
        "{\"name\": \"x\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://198.18.0.1/\"}} | /destination/url",
        "{\"name\": \"x\", \"filter\": \"op ==\", \"destination\": {\"type\": \"webhook\", \"url\": \"https://93.184.216.34/\"}} | /filter",
        "{\"name\": \"x\", \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}}          | /destination/type",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]                         | ''",
    })
    void badBodiesGetAProblemNamingTheField(String body, String field) {
        authorized().filter(OpenApiContract.responsesOnly()).body(body).post("/subscriptions").then().statusCode(400)
                .contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo(field)).body("status", equalTo(400));
    }

    @Test
    void deliveryLimitsAreStoredAndShownAsGivenAndLeftOutWhenUnset() {
        String limited = BODY.replace("\"orders\"", "\"limited\"").replace("}}",
                "}, \"max_in_flight\": 2, \"rate_limit\": {\"requests\": 30, \"per\": \"minute\"}}");
        String id = authorized().body(limited).post("/subscriptions").then().statusCode(201)
                .body("max_in_flight", equalTo(2)).body("rate_limit.requests", equalTo(30))
                .body("rate_limit.per", equalTo("minute")).extract().path("id");
        authorized().get("/subscriptions/" + id).then().statusCode(200)
                .body("max_in_flight", equalTo(2)).body("rate_limit.requests", equalTo(30));
        // "per" defaults to second and is shown
        authorized().body(BODY.replace("\"orders\"", "\"limited\"").replace("}}", "}, \"rate_limit\": {\"requests\": 5}}"))
                .put("/subscriptions/" + id).then().statusCode(200)
                .body("rate_limit.per", equalTo("second")).body("$", not(org.hamcrest.Matchers.hasKey("max_in_flight")));
        authorized().body(BODY.replace("\"orders\"", "\"limited\"")).put("/subscriptions/" + id).then().statusCode(200)
                .body("$", not(org.hamcrest.Matchers.hasKey("rate_limit")));
        authorized().filter(OpenApiContract.responsesOnly())
                .body(limited.replace("\"max_in_flight\": 2", "\"max_in_flight\": 65")).put("/subscriptions/" + id)
                .then().statusCode(400).contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo("/max_in_flight"));
        authorized().delete("/subscriptions/" + id).then().statusCode(200);
    }

    @Test
    void aRetryPolicyIsStoredAndShownAsGivenAndConfiguredOnesShowTheirs() {
        String withRetry = BODY.replace("\"orders\"", "\"retrying\"").replace("}}",
                "}, \"retry\": {\"max_attempts\": 4, \"window_ms\": 90000}}");
        String id = authorized().body(withRetry).post("/subscriptions").then().statusCode(201)
                .body("retry.max_attempts", equalTo(4)).body("retry.window_ms", equalTo(90000))
                .body("retry", not(org.hamcrest.Matchers.hasKey("max_backoff_ms")))
                .extract().path("id");
        // read back from walhook.subscription
        authorized().get("/subscriptions/" + id).then().statusCode(200)
                .body("retry.max_attempts", equalTo(4)).body("retry.window_ms", equalTo(90000));
        authorized().body(withRetry.replace("\"max_attempts\": 4, ", "").replace("90000", "60000, \"max_backoff_ms\": 500"))
                .put("/subscriptions/" + id).then().statusCode(200)
                .body("retry.max_backoff_ms", equalTo(500)).body("retry.window_ms", equalTo(60000))
                .body("retry", not(org.hamcrest.Matchers.hasKey("max_attempts")));
        // without one, the global settings apply and no retry object is shown
        authorized().body(BODY.replace("\"orders\"", "\"retrying\"")).put("/subscriptions/" + id).then().statusCode(200)
                .body("$", not(org.hamcrest.Matchers.hasKey("retry")));
        authorized().filter(OpenApiContract.responsesOnly())
                .body(withRetry.replace("\"max_attempts\": 4", "\"max_attempts\": 0")).put("/subscriptions/" + id)
                .then().statusCode(400).contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo("/retry/max_attempts"));
        authorized().filter(OpenApiContract.responsesOnly())
                .body(withRetry.replace("\"max_attempts\"", "\"attempts\"")).put("/subscriptions/" + id)
                .then().statusCode(400).body("field", equalTo("/retry/attempts"));
        authorized().delete("/subscriptions/" + id).then().statusCode(200).body("discarded_events", equalTo(0));
        authorized().get("/subscriptions/config:cfg").then().statusCode(200)
                .body("retry.max_attempts", equalTo(3)).body("retry.window_ms", equalTo(120000));
    }

    private static RequestSpecification patching() {
        return given().header("Authorization", "Bearer " + TOKEN).contentType("application/merge-patch+json");
    }

    /**
     * A PATCH (JSON Merge Patch, RFC 7396) changes what it names and keeps the rest: the secret, the
     * URL's query and the header values, which a GET never shows and so a PUT of what was read would
     * have to send again. A null removes a field; a header is named in any case.
     */
    @Test
    void aPatchChangesWhatItNamesAndKeepsTheWriteOnlyRest() {
        String body = BODY.replace("\"orders\"", "\"patched\"").replace("/hook\"", "/hook?token=q1\", \"headers\":"
                + " {\"X-Tenant\": \"42\", \"X-Drop\": \"x\"}").replace("}}", "}, \"filter\": \"new.id > 0\"}");
        String id = authorized().body(body).post("/subscriptions").then().statusCode(201).extract().path("id");
        try {
            patching().body("{\"filter\": \"new.id > 10\", \"destination\": {\"headers\": {\"x-drop\": null,"
                    + " \"X-Added\": \"y\"}}}").patch("/subscriptions/" + id).then().statusCode(200)
                    .body("name", equalTo("patched")).body("filter", equalTo("new.id > 10"))
                    .body("destination.secret_set", equalTo(true))
                    .body("destination.headers_set", contains("X-Added", "X-Tenant"))
                    .body("tables", contains("public.orders")).body("operations", contains("insert"));
            // application/json is taken too: most clients send it; a null removes the filter
            authorized().body("{\"filter\": null, \"batch\": {\"max_events\": 5}}").patch("/subscriptions/" + id)
                    .then().statusCode(200).body("$", not(org.hamcrest.Matchers.hasKey("filter")))
                    .body("batch.max_events", equalTo(5)).body("destination.secret_set", equalTo(true));
            authorized().get("/subscriptions/" + id).then().statusCode(200).body("batch.max_events", equalTo(5))
                    .body("destination.headers_set", contains("X-Added", "X-Tenant"))
                    .body("destination.url", equalTo("https://93.184.216.34/hook"));
            // an empty patch changes nothing
            patching().body("{}").patch("/subscriptions/" + id).then().statusCode(200).body("batch.max_events", equalTo(5));
            // another query on the same path of the same host: the secret and headers stay (the old query goes:
            // url is the whole URL)
            patching().body("{\"destination\": {\"url\": \"https://93.184.216.34:443/hook?v=2\"}}").patch("/subscriptions/" + id)
                    .then().statusCode(200).body("destination.secret_set", equalTo(true))
                    .body("destination.headers_set", contains("X-Added", "X-Tenant"))
                    .body("destination.url", equalTo("https://93.184.216.34:443/hook"));
            // another host, or another path of the same host (shared by path between tenants): what the old endpoint
            // was given is sent there only if the patch gives it again; also written with the blanks around it that a
            // URL is read without
            for (String url : List.of("https://93.184.216.35/hook", " https://93.184.216.35/hook", "https://93.184.216.35/hook\\n",
                    "\\thttps://93.184.216.35:443/hook ", "https://93.184.216.34/other")) {
                invalidRequest().contentType("application/merge-patch+json")
                        .body("{\"destination\": {\"url\": \"" + url + "\"}}").patch("/subscriptions/" + id)
                        .then().statusCode(400).body("field", equalTo("/destination/secret"));
            }
            invalidRequest().contentType("application/merge-patch+json")
                    .body("{\"destination\": {\"url\": \"http://93.184.216.34/hook\", \"secret\": null}}")
                    .patch("/subscriptions/" + id).then().statusCode(400).body("field", equalTo("/destination/headers"));
            patching().body("{\"destination\": {\"url\": \"https://93.184.216.35/hook\", \"secret\":"
                    + " \"whsec_d2FsaG9vay10ZXN0LXNlY3JldC1ub3QtZm9yLXVzZSE=\", \"headers\": {\"X-New\": \"n\"}}}")
                    .patch("/subscriptions/" + id).then().statusCode(200).body("destination.secret_set", equalTo(true))
                    .body("destination.headers_set", contains("X-New"));
            patching().body("{\"destination\": {\"secret\": null}}").patch("/subscriptions/" + id).then().statusCode(200)
                    .body("destination.secret_set", equalTo(false));
        } finally {
            authorized().delete("/subscriptions/" + id).then().statusCode(200);
        }
    }

    /** A GET's body PUT back is refused, pointing to PATCH: taken as written, it would have dropped the secret. */
    @Test
    void aViewPutBackIsRefusedPointingToPatch() {
        String id = authorized().body(BODY.replace("\"orders\"", "\"viewed\"")).post("/subscriptions").then()
                .statusCode(201).extract().path("id");
        try {
            String view = authorized().get("/subscriptions/" + id).then().statusCode(200).extract().asString();
            invalidRequest().contentType("application/json").body(view).put("/subscriptions/" + id).then().statusCode(400)
                    .body("field", equalTo("/id")).body("detail", containsString("PATCH"));
            String withoutId = view.replaceFirst("\"id\":\"[^\"]+\",", "").replace("\"read_only\":false,", "")
                    .replace("\"paused\":false,", "");
            invalidRequest().contentType("application/json").body(withoutId).put("/subscriptions/" + id).then()
                    .statusCode(400).body("field", equalTo("/destination/secret_set")).body("detail", containsString("PATCH"));
            authorized().get("/subscriptions/" + id).then().statusCode(200).body("destination.secret_set", equalTo(true));
        } finally {
            authorized().delete("/subscriptions/" + id).then().statusCode(200);
        }
    }

    @Test
    void aBadPatchGetsAProblemNamingTheFieldAndChangesNothing() {
        String id = authorized().body(BODY.replace("\"orders\"", "\"unpatched\"")).post("/subscriptions").then()
                .statusCode(201).extract().path("id");
        try {
            // what a view shows but a subscription does not hold: a GET's body is not a patch
            invalidRequest().contentType("application/merge-patch+json").body("{\"destination\": {\"secret_set\": false}}")
                    .patch("/subscriptions/" + id).then().statusCode(400).contentType(ApiProblem.MEDIA_TYPE)
                    .body("field", equalTo("/destination/secret_set"));
            invalidRequest().contentType("application/merge-patch+json").body("{\"paused\": true}")
                    .patch("/subscriptions/" + id).then().statusCode(400).body("field", equalTo("/paused"));
            // a removal naming no field removes nothing: refused, not a silent success
            invalidRequest().contentType("application/merge-patch+json").body("{\"filtr\": null}")
                    .patch("/subscriptions/" + id).then().statusCode(400).body("field", equalTo("/filtr"));
            invalidRequest().contentType("application/merge-patch+json").body("{\"retry\": {\"attempts\": null}}")
                    .patch("/subscriptions/" + id).then().statusCode(400).body("field", equalTo("/retry/attempts"));
            invalidRequest().contentType("application/merge-patch+json").body("{\"tables\": [\"public.a\", null]}")
                    .patch("/subscriptions/" + id).then().statusCode(400).body("field", equalTo("/tables/1"));
            invalidRequest().contentType("application/merge-patch+json")
                    .body("{\"destination\": {\"headers\": {\"Authorization: Bearer abc123\": null}}}")
                    .patch("/subscriptions/" + id).then().statusCode(400).body("field", equalTo("/destination/headers"))
                    .body(not(containsString("abc123")));
            // a required field removed
            invalidRequest().contentType("application/merge-patch+json").body("{\"name\": null}")
                    .patch("/subscriptions/" + id).then().statusCode(400).body("field", equalTo("/name"));
            invalidRequest().contentType("application/merge-patch+json").body("{\"filter\": \"op ==\"}")
                    .patch("/subscriptions/" + id).then().statusCode(400).body("field", equalTo("/filter"));
            // another type replaces the destination, not merged into the webhook's url and secret
            invalidRequest().contentType("application/merge-patch+json")
                    .body("{\"destination\": {\"type\": \"amqp\", \"address\": \"q\"}}").patch("/subscriptions/" + id)
                    .then().statusCode(400).body("field", equalTo("/destination/type"))
                    .body("detail", containsString("WALHOOK_AMQP_URL"));
            invalidRequest().contentType("application/merge-patch+json").body("[]").patch("/subscriptions/" + id)
                    .then().statusCode(400).body("field", equalTo(""));
            invalidRequest().contentType("application/merge-patch+json").body("null").patch("/subscriptions/" + id)
                    .then().statusCode(400).body("field", equalTo(""));
            invalidRequest().contentType("text/plain").body("{}").patch("/subscriptions/" + id).then().statusCode(415);
            authorized().get("/subscriptions/" + id).then().statusCode(200).body("name", equalTo("unpatched"))
                    .body("destination.secret_set", equalTo(true)).body("$", not(org.hamcrest.Matchers.hasKey("filter")));

            invalidRequest().contentType("application/merge-patch+json")
                    .body("{\"destination\": {\"headers\": {\"X-A\": \"1\", \"x-a\": null}}}").patch("/subscriptions/" + id)
                    .then().statusCode(400).body("field", equalTo("/destination/headers/x-a"));
            patching().body("{}").patch("/subscriptions/" + java.util.UUID.randomUUID()).then().statusCode(404);
            invalidRequest().contentType("application/merge-patch+json").body("[]")
                    .patch("/subscriptions/" + java.util.UUID.randomUUID()).then().statusCode(404);
            patching().body("{\"filter\": \"true\"}").patch("/subscriptions/config:cfg").then().statusCode(409)
                    .body("detail", containsString("WALHOOK_SUBSCRIPTIONS_"));
            reader().contentType("application/merge-patch+json").body("{}").patch("/subscriptions/" + id).then()
                    .statusCode(403);
            patching().body("{\"name\": \"cfg\"}").patch("/subscriptions/" + id).then().statusCode(409)
                    .body("field", equalTo("/name"));
        } finally {
            authorized().delete("/subscriptions/" + id).then().statusCode(200);
        }
    }

    /** Patches at once, each adding its own header: none is lost to another's read of the body before it. */
    @Test
    void concurrentPatchesEachKeepTheOthersChanges() throws Exception {
        String id = authorized().body(BODY.replace("\"orders\"", "\"contended\"")).post("/subscriptions").then()
                .statusCode(201).extract().path("id");
        int writers = 12;
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(writers);
        try {
            java.util.concurrent.CountDownLatch start = new java.util.concurrent.CountDownLatch(1);
            List<java.util.concurrent.Future<Integer>> answers = new java.util.ArrayList<>();
            for (int i = 0; i < writers; i++) {
                String header = "X-H" + (char) ('a' + i);
                answers.add(pool.submit(() -> {
                    start.await();
                    return patching().body("{\"destination\": {\"headers\": {\"" + header + "\": \"v\"}}}")
                            .patch("/subscriptions/" + id).then().extract().statusCode();
                }));
            }
            start.countDown();
            for (java.util.concurrent.Future<Integer> answer : answers) {
                assertThat(answer.get(60, java.util.concurrent.TimeUnit.SECONDS)).isEqualTo(200);
            }
            List<String> headers = authorized().get("/subscriptions/" + id).then().statusCode(200).extract()
                    .path("destination.headers_set");
            assertThat(headers).hasSize(writers);
        } finally {
            pool.shutdownNow();
            authorized().delete("/subscriptions/" + id).then().statusCode(200);
        }
    }

    @Test
    void aBodyThatIsNotJsonIsUnsupported() {
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + TOKEN)
                .contentType("text/plain").body(BODY)
                .post("/subscriptions").then().statusCode(415).contentType(ApiProblem.MEDIA_TYPE);
        // a Content-Type that is no media type at all is the same mistake, not a server error
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + TOKEN)
                .header("Content-Type", "json").body(BODY.getBytes(java.nio.charset.StandardCharsets.UTF_8))
                .post("/subscriptions").then().statusCode(415).contentType(ApiProblem.MEDIA_TYPE);
    }
}
