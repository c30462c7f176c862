package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.hamcrest.Matchers.contains;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.containsStringIgnoringCase;
import static org.hamcrest.Matchers.empty;
import static org.hamcrest.Matchers.endsWith;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.everyItem;
import static org.hamcrest.Matchers.hasEntry;
import static org.hamcrest.Matchers.hasItem;
import static org.hamcrest.Matchers.hasKey;
import static org.hamcrest.Matchers.matchesPattern;
import static org.hamcrest.Matchers.not;
import static org.hamcrest.Matchers.startsWith;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.UUID;

import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.ValidatableResponse;
import io.restassured.specification.RequestSpecification;
import io.walhook.testing.TestPostgres;

/**
 * The backfill API against real tables of the test database (walhook's publication is FOR ALL
 * TABLES, so a table created here is published): starting one with its defaults or with every
 * field, listing and reading them, pausing, resuming and cancelling, and every refusal with the
 * field it names. The destination (a public address) never takes a request; backfills that must
 * stay running read one row a second from tables of hundreds of rows.
 */
@QuarkusTest
@QuarkusTestResource(value = SubscriptionApiTest.Resource.class, restrictToAnnotatedClass = true)
@ExtendWith(OpenApiContract.class)
class BackfillApiTest {

    private static final String TIMESTAMP = "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?Z";
    /** A backfill that stays running for minutes: one row a chunk, one row a second. */
    private static final String SLOW = "\"chunk_size\": 1, \"max_rows_per_second\": 1";

    @ConfigProperty(name = "quarkus.datasource.jdbc.url")
    String jdbcUrl;

    private void sql(String... statements) throws Exception {
        TestPostgres.shared().execute(jdbcUrl.substring(jdbcUrl.lastIndexOf('/') + 1), statements);
    }

    private static RequestSpecification authorized() {
        return given().header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN).contentType("application/json");
    }

    private static RequestSpecification reader() {
        return given().header("Authorization", "Bearer " + SubscriptionApiTest.READ_TOKEN);
    }

    /** Creates a subscription of these table patterns through the API; its id. */
    private static String subscription(String name, String... tables) {
        String list = String.join(", ", Arrays.stream(tables).map(t -> "\"" + t + "\"").toList());
        return authorized().body("{\"name\": \"" + name + "\", \"tables\": [" + list + "], \"destination\":"
                + " {\"type\": \"webhook\", \"url\": \"https://93.184.216.34/hook\"}}")
                .post("/subscriptions").then().statusCode(201).extract().path("id");
    }

    private static ValidatableResponse start(String subscription, String body) {
        return authorized().body(body).post("/subscriptions/" + subscription + "/backfills").then();
    }

    /** Starts a backfill that is refused on purpose (its body may break the contract): the problem. */
    private static ValidatableResponse refused(String subscription, String body, int status) {
        return authorized().filter(OpenApiContract.responsesOnly()).body(body)
                .post("/subscriptions/" + subscription + "/backfills").then().statusCode(status)
                .contentType(ApiProblem.MEDIA_TYPE).body("status", equalTo(status));
    }

    private static ValidatableResponse control(String subscription, String backfill, String action) {
        return authorized().post("/subscriptions/" + subscription + "/backfills/" + backfill + "/" + action).then();
    }

    private static String state(String subscription, String backfill) {
        return authorized().get("/subscriptions/" + subscription + "/backfills/" + backfill).then().statusCode(200)
                .extract().path("state");
    }

    @Test
    void withoutABodyItBackfillsEveryTableOfTheSubscriptionWithTheDefaults() throws Exception {
        sql("CREATE TABLE bfd_b (id int PRIMARY KEY)", "CREATE TABLE bfd_a (id text PRIMARY KEY)");
        String id = subscription("defaults", "public.bfd_a", "public.bfd_b");
        // no body at all (RestAssured would call a POST without a Content-Type a form: it is JSON here)
        var started = authorized().post("/subscriptions/" + id + "/backfills").then().statusCode(202)
                .contentType("application/json")
                .body("subscription_id", equalTo(id))
                .body("state", equalTo("running"))
                .body("origin", equalTo("api"))
                .body("tables.table", contains("public.bfd_a", "public.bfd_b")) // the publication's order: by name
                .body("tables.rows_sent", contains(0, 0))
                .body("tables.done", contains(false, false))
                .body("rows_sent", equalTo(0))
                .body("chunk_size", equalTo(1000))
                .body("$", hasEntry("filter", null))
                .body("$", hasEntry("max_rows_per_second", null))
                .body("$", hasEntry("error", null))
                .body("$", hasEntry("finished_at", null))
                .body("created_at", matchesPattern(TIMESTAMP))
                .body("updated_at", matchesPattern(TIMESTAMP))
                .extract();
        String backfill = started.path("id");
        assertThat(UUID.fromString(backfill).toString()).isEqualTo(backfill);
        assertThat(started.header("Location")).endsWith("/subscriptions/" + id + "/backfills/" + backfill);
        String location = URI.create(started.header("Location")).getPath();
        authorized().get(location).then().statusCode(200).body("id", equalTo(backfill));

        // empty tables: done at once, and the ended backfill shows when it finished
        await().atMost(Duration.ofSeconds(60)).until(() -> state(id, backfill).equals("done"));
        authorized().get(location).then().statusCode(200)
                .body("tables.done", contains(true, true))
                .body("rows_sent", equalTo(0))
                .body("finished_at", matchesPattern(TIMESTAMP))
                .body("$", hasEntry("error", null));
        control(id, backfill, "resume").statusCode(409).contentType(ApiProblem.MEDIA_TYPE)
                .body("detail", containsString("done"));
        control(id, backfill, "cancel").statusCode(409).contentType(ApiProblem.MEDIA_TYPE);
        // an ended backfill holds no table
        String again = start(id, "").statusCode(202).extract().path("id");
        await().atMost(Duration.ofSeconds(60)).until(() -> state(id, again).equals("done"));
        authorized().get("/subscriptions/" + id + "/backfills").then().statusCode(200)
                .body("id", contains(backfill, again));
    }

    @Test
    void everyFieldIsStoredAsGivenAndTheBackfillIsPausedResumedAndCancelled() throws Exception {
        sql("CREATE TABLE bfx_orders (id int PRIMARY KEY, status text)",
                "INSERT INTO bfx_orders SELECT i, 'new' FROM generate_series(1, 500) i",
                "CREATE TABLE bfx_lines (order_id int, line int, PRIMARY KEY (order_id, line))");
        String id = subscription("explicit", "public.bfx_*");
        var started = start(id, "{\"tables\": [\"public.bfx_orders\"], \"filter\": \"new.status != 'archived'\", "
                + SLOW + "}").statusCode(202)
                .body("subscription_id", equalTo(id))
                .body("state", equalTo("running"))
                .body("origin", equalTo("api"))
                .body("tables.table", contains("public.bfx_orders"))
                .body("filter", equalTo("new.status != 'archived'"))
                .body("chunk_size", equalTo(1))
                .body("max_rows_per_second", equalTo(1))
                .body("$", hasEntry("finished_at", null))
                .extract();
        String backfill = started.path("id");
        assertThat(started.header("Location")).endsWith("/subscriptions/" + id + "/backfills/" + backfill);

        authorized().get("/subscriptions/" + id + "/backfills").then().statusCode(200)
                .body("id", contains(backfill)).body("[0].filter", equalTo("new.status != 'archived'"));
        authorized().get("/subscriptions/" + id + "/backfills/" + backfill).then().statusCode(200)
                .body("id", equalTo(backfill)).body("state", equalTo("running"))
                .body("chunk_size", equalTo(1)).body("max_rows_per_second", equalTo(1));
        // a backfill id in upper case is the same backfill
        authorized().get("/subscriptions/" + id + "/backfills/" + backfill.toUpperCase(Locale.ROOT)).then()
                .statusCode(200).body("id", equalTo(backfill));

        control(id, backfill, "pause").statusCode(200).body("id", equalTo(backfill)).body("state", equalTo("paused"))
                .body("$", hasEntry("finished_at", null));
        assertThat(state(id, backfill)).isEqualTo("paused");
        control(id, backfill, "pause").statusCode(200).body("state", equalTo("paused"));
        // a paused backfill still holds its table
        refused(id, "{\"tables\": [\"public.bfx_orders\"]}", 409).body("field", equalTo("/tables"))
                .body("detail", containsString(backfill)).body("detail", containsString("paused"));

        control(id, backfill, "resume").statusCode(200).body("state", equalTo("running"));
        assertThat(state(id, backfill)).isEqualTo("running");
        control(id, backfill, "resume").statusCode(200).body("state", equalTo("running"));
        refused(id, "{\"tables\": [\"public.bfx_orders\"]}", 409).body("field", equalTo("/tables"))
                .body("detail", containsString("public.bfx_orders")).body("detail", containsString("running"));
        // with no tables given, the subscription's tables: bfx_orders among them
        refused(id, "", 409).body("field", equalTo("/tables"));
        // another table of the subscription is free
        String lines = start(id, "{\"tables\": [\"public.bfx_lines\"]}").statusCode(202).extract().path("id");

        control(id, backfill, "cancel").statusCode(200).body("state", equalTo("cancelled"))
                .body("finished_at", matchesPattern(TIMESTAMP)).body("$", hasEntry("error", null));
        assertThat(state(id, backfill)).isEqualTo("cancelled");
        control(id, backfill, "resume").statusCode(409).contentType(ApiProblem.MEDIA_TYPE)
                .body("status", equalTo(409)).body("detail", containsString("cancelled"))
                .body("$", not(hasKey("field")));
        control(id, backfill, "pause").statusCode(409).contentType(ApiProblem.MEDIA_TYPE);
        control(id, backfill, "cancel").statusCode(409).contentType(ApiProblem.MEDIA_TYPE);
        assertThat(state(id, backfill)).isEqualTo("cancelled");

        // cancelled, it holds its table no more
        String next = start(id, "{\"tables\": [\"public.bfx_orders\"], " + SLOW + "}").statusCode(202)
                .extract().path("id");
        authorized().get("/subscriptions/" + id + "/backfills").then().statusCode(200)
                .body("id", contains(backfill, lines, next))
                .body("[0].state", equalTo("cancelled")).body("[2].state", equalTo("running"));
        control(id, next, "cancel").statusCode(200).body("state", equalTo("cancelled"));
    }

    @Test
    void aSubscriptionAddressedInUpperCaseIsTheSameOne() throws Exception {
        sql("CREATE TABLE bfu_items (id int PRIMARY KEY)", "INSERT INTO bfu_items SELECT generate_series(1, 300)");
        String id = subscription("shouting-backfill", "public.bfu_items");
        String upper = id.toUpperCase(Locale.ROOT);
        String backfill = start(upper, "{" + SLOW + "}").statusCode(202).body("subscription_id", equalTo(id))
                .header("Location", containsStringIgnoringCase("/subscriptions/" + id + "/backfills/"))
                .extract().path("id");
        authorized().get("/subscriptions/" + upper + "/backfills/" + backfill).then().statusCode(200)
                .body("subscription_id", equalTo(id));
        control(upper, backfill, "cancel").statusCode(200).body("state", equalTo("cancelled"));
    }

    /**
     * A subscription id with white space around it (percent-encoded) is either no subscription, as
     * for {@code GET /subscriptions/{id}}, or the subscription: never a 500 after the backfill was
     * stored and started (its client would try again and get a 409).
     */
    @Test
    void aSubscriptionIdWithWhiteSpaceIsNeverAServerError() throws Exception {
        sql("CREATE TABLE bfw_items (id int PRIMARY KEY)", "INSERT INTO bfw_items SELECT generate_series(1, 300)");
        String id = subscription("white-space", "public.bfw_items");
        int status = authorized().filter(OpenApiContract.responsesOnly()).body("{" + SLOW + "}")
                .post("/subscriptions/ " + id + "/backfills").then().extract().statusCode();
        List<String> stored = authorized().get("/subscriptions/" + id + "/backfills").then().statusCode(200)
                .extract().path("id");
        stored.forEach(backfill -> control(id, backfill, "cancel").statusCode(200));
        assertThat(status).as("POST /subscriptions/%20<id>/backfills (backfills it stored: " + stored.size() + ")")
                .isIn(202, 404);
        assertThat(stored).as("backfills stored").hasSize(status == 202 ? 1 : 0);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        // the tables: each refusal names the table's index in the request
        "{\"tables\": [\"public.bfr_missing\"]}                        | /tables/0 | does not exist",
        "{\"tables\": [\"public.bfr_items\", \"public.outside\"]}      | /tables/1 | outside subscription",
        "{\"tables\": [\"public.bfr_items\", \"public.bfr_keyless\"]}  | /tables/1 | no primary key",
        "{\"tables\": [\"bfr_items\"]}                                 | /tables/0 | schema.table",
        "{\"tables\": [\"public.bfr_*\"]}                              | /tables/0 | no patterns",
        "{\"tables\": []}                                              | /tables   | empty",
        "{\"tables\": \"public.bfr_items\"}                            | /tables   | array",
        "{\"tables\": [1]}                                             | /tables/0 | string",
        // no tables given: the subscription's, and bfr_keyless is one of them
        "''                                                            | /tables   | no primary key",
        "{}                                                            | /tables   | no primary key",
        "{\"filter\": \"new.id ==\", \"tables\": [\"public.bfr_items\"]} | /filter  | ''",
        "{\"filter\": 1}                                               | /filter   | CEL",
        "{\"filter\": \"  \", \"tables\": [\"public.bfr_items\"]}     | /filter   | /filter is empty",
        "{\"chunk_size\": 0}                                           | /chunk_size | 100000",
        "{\"chunk_size\": 100001}                                      | /chunk_size | 100000",
        "{\"chunk_size\": -1}                                          | /chunk_size | 100000",
        "{\"chunk_size\": 1.5}                                         | /chunk_size | whole number",
        "{\"chunk_size\": \"10\"}                                      | /chunk_size | whole number",
        "{\"chunk_size\": 4294967296}                                  | /chunk_size | chunk_size is above 2147483646; use 1 to 100000",
        "{\"chunk_size\": -4294967296}                                 | /chunk_size | chunk_size is below -2147483647; use 1 to 100000",
        "{\"max_rows_per_second\": 10000000000}                        | /max_rows_per_second | above 2147483646; use 1 to 10000000",
        "{\"max_rows_per_second\": 0}                                  | /max_rows_per_second | 10000000",
        "{\"max_rows_per_second\": 10000001}                           | /max_rows_per_second | 10000000",
        "{\"chunk\": 10}                                               | /chunk    | not a backfill field",
        "{\"tables\": [\"public.bfr_items\"], \"subscription\": \"x\"} | /subscription | not a backfill field",
        // the body itself
        "[\"public.bfr_items\"]                                        | ''        | JSON array",
        "\"public.bfr_items\"                                          | ''        | JSON string",
        "{\"tables\": [\"public.bfr_items\"]} xyz                      | ''        | after",
        "{\"chunk_size\": 10} {}                                       | ''        | after",
        "{\"tables\": [\"public.bfr_items\"]                           | ''        | not valid JSON",
        "{\"filter\": null}                                            | /filter   | null",
        "{\"tables\": [null]}                                          | /tables/0 | null",
    })
    void aRefusedBackfillIsABadRequestNamingTheField(String body, String field, String detail) throws Exception {
        String id = refusals();
        refused(id, body, 400).body("title", equalTo("Bad Request")).body("field", equalTo(field))
                .body("detail", containsString(detail));
        authorized().get("/subscriptions/" + id + "/backfills").then().statusCode(200).body("$", empty());
    }

    private static volatile String refusals;

    /** The subscription of public.bfr_* (bfr_items with a key, bfr_keyless without), created once. */
    private synchronized String refusals() throws Exception {
        if (refusals == null) {
            sql("CREATE TABLE bfr_items (id int PRIMARY KEY)", "INSERT INTO bfr_items SELECT generate_series(1, 10)",
                    "CREATE TABLE bfr_keyless (id int)", "CREATE TABLE outside (id int PRIMARY KEY)");
            refusals = subscription("refusals", "public.bfr_*");
        }
        return refusals;
    }

    /** walhook's own tables (subscriptions with their secrets and headers, the durable queue) are never sent. */
    @Test
    void walhooksOwnStateIsNeverBackfilledToADestination() throws Exception {
        refusals(); // public.bfr_items
        String everything = subscription("everything", "*");
        for (String table : List.of("walhook.subscription", "walhook.parked_event", "walhook.activation")) {
            refused(everything, "{\"tables\": [\"public.bfr_items\", \"" + table + "\"]}", 400)
                    .body("field", equalTo("/tables/1")).body("detail", containsString("walhook's own state"));
        }
        authorized().get("/subscriptions/" + everything + "/backfills").then().statusCode(200).body("$", empty());
    }

    /** A control character in a table name is the caller's mistake, named, not a server error. */
    @Test
    void aTableNameWithAControlCharacterIsABadRequest() throws Exception {
        refused(refusals(), "{\"tables\": [\"public.bfr_items\\u0000\"]}", 400).body("field", equalTo("/tables/0"))
                .body("detail", containsString("control character"));
        refused(refusals(), "{\"tables\": [\"public.bfr\\n_items\"]}", 400).body("field", equalTo("/tables/0"));
    }

    /** Stripped of white space like the others, a refused table is still named by its index in the request. */
    @Test
    void aTableNameWithWhiteSpaceIsRefusedByItsIndex() throws Exception {
        refused(refusals(), "{\"tables\": [\"public.bfr_items\", \" public.bfr_keyless \"]}", 400)
                .body("field", equalTo("/tables/1")).body("detail", containsString("no primary key"));
    }

    @Test
    void aConfiguredSubscriptionWhoseTablesMatchNothingHasNothingToBackfill() {
        refused("config:cfg", "", 400).body("field", equalTo("/tables")).body("detail", containsString("match no table"));
        authorized().get("/subscriptions/config:cfg/backfills").then().statusCode(200).body("$", empty());
    }

    @Test
    void aBodyThatIsNotJsonIsUnsupported() throws Exception {
        String id = refusals();
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .contentType("text/plain").body("{\"tables\": [\"public.bfr_items\"]}")
                .post("/subscriptions/" + id + "/backfills").then().statusCode(415).contentType(ApiProblem.MEDIA_TYPE)
                .body("detail", containsString("application/json"));
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .contentType("*/*").body("{\"tables\": [\"public.bfr_items\"]}".getBytes(StandardCharsets.UTF_8))
                .post("/subscriptions/" + id + "/backfills").then().statusCode(415).contentType(ApiProblem.MEDIA_TYPE);
        // without a body there is nothing to read as JSON: the defaults (here refused for bfr_keyless), not a 415
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .contentType("text/plain").post("/subscriptions/" + id + "/backfills").then().statusCode(400)
                .contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo("/tables"));
        authorized().get("/subscriptions/" + id + "/backfills").then().statusCode(200).body("$", empty());
    }

    /**
     * A subscription held out of force (here a configured one of the same name shadows it) keeps
     * its backfills, running but waiting: they are listed, read and controlled as its others are,
     * as its own view is. They answered 404, as if it did not exist, and could not be cancelled.
     */
    @Test
    void aHeldSubscriptionsBackfillsAreListedReadAndControlled() throws Exception {
        sql("CREATE TABLE bfh_items (id int PRIMARY KEY)", "INSERT INTO bfh_items SELECT generate_series(1, 300)");
        String id = subscription("held-backfills", "public.bfh_items");
        String backfill = start(id, "{" + SLOW + "}").statusCode(202).extract().path("id");
        // renamed in the table as the configured "cfg": shadowed by it, so held
        sql("UPDATE walhook.subscription SET name = 'cfg', body = jsonb_set(body, '{name}', '\"cfg\"'),"
                + " updated_at = clock_timestamp() WHERE id = '" + id + "'");
        try {
            authorized().get("/subscriptions/" + id).then().statusCode(200);
            authorized().get("/subscriptions/" + id + "/backfills").then().statusCode(200)
                    .body("id", org.hamcrest.Matchers.contains(backfill));
            authorized().get("/subscriptions/" + id + "/backfills/" + backfill).then().statusCode(200)
                    .body("state", equalTo("running"));
            control(id, backfill, "cancel").statusCode(200).body("state", equalTo("cancelled"));
            // one is not started for it while it is held
            start(id, "{}").statusCode(404);
        } finally {
            sql("UPDATE walhook.subscription SET name = 'held-backfills', body = jsonb_set(body, '{name}',"
                    + " '\"held-backfills\"'), updated_at = clock_timestamp() WHERE id = '" + id + "'");
        }
    }

    /** A field named with what is no field name (a whole header pasted) is refused without being repeated. */
    @Test
    void aBackfillFieldNamedWithWhatIsNoFieldNameIsNotRepeated() throws Exception {
        sql("CREATE TABLE bfp_items (id int PRIMARY KEY)");
        String id = subscription("pasted-field", "public.bfp_items");
        for (String body : List.of("{\"Authorization: Bearer s3cr3t-pasted\": 1}", "{\"x'Bearer s3cr3t-pasted\": 1}")) {
            String answer = authorized().filter(OpenApiContract.responsesOnly()).body(body)
                    .post("/subscriptions/" + id + "/backfills").then().statusCode(400).contentType(ApiProblem.MEDIA_TYPE)
                    .body("field", equalTo("")).extract().asString();
            assertThat(answer).doesNotContain("s3cr3t");
        }
        authorized().filter(OpenApiContract.responsesOnly()).body("{\"chunk\": 1}").post("/subscriptions/" + id
                + "/backfills").then().statusCode(400).body("field", equalTo("/chunk"));
    }

    @Test
    void anUnknownSubscriptionOrBackfillIsNotFound() throws Exception {
        String unknown = UUID.randomUUID().toString();
        authorized().filter(OpenApiContract.responsesOnly()).body("{}").post("/subscriptions/" + unknown + "/backfills")
                .then().statusCode(404).contentType(ApiProblem.MEDIA_TYPE).body("detail", containsString(unknown));
        authorized().get("/subscriptions/" + unknown + "/backfills").then().statusCode(404)
                .contentType(ApiProblem.MEDIA_TYPE);
        authorized().get("/subscriptions/config:nope/backfills").then().statusCode(404).contentType(ApiProblem.MEDIA_TYPE);
        authorized().get("/subscriptions/" + unknown + "/backfills/" + UUID.randomUUID()).then().statusCode(404)
                .contentType(ApiProblem.MEDIA_TYPE);

        sql("CREATE TABLE bfn_items (id int PRIMARY KEY)", "INSERT INTO bfn_items SELECT generate_series(1, 300)");
        String id = subscription("not-found", "public.bfn_items");
        String other = subscription("not-found-other", "public.bfn_items");
        String backfill = start(id, "{" + SLOW + "}").statusCode(202).extract().path("id");
        for (String bid : List.of("not-a-uuid", UUID.randomUUID().toString(), backfill + "0")) {
            authorized().get("/subscriptions/" + id + "/backfills/" + bid).then().statusCode(404)
                    .contentType(ApiProblem.MEDIA_TYPE).body("title", equalTo("Not Found")).body("detail", containsString(bid));
            for (String action : List.of("pause", "resume", "cancel")) {
                control(id, bid, action).statusCode(404).contentType(ApiProblem.MEDIA_TYPE);
            }
        }
        // the id as written, not a form UUID.fromString also takes (spaces around it, parts without their zeros)
        for (String bid : List.of("%20" + backfill, backfill + "%20", backfill.replaceFirst("-0+([0-9a-f])", "-$1"))) {
            if (bid.equals(backfill)) {
                continue; // no part of this id starts with a zero
            }
            authorized().urlEncodingEnabled(false).get("/subscriptions/" + id + "/backfills/" + bid).then().statusCode(404)
                    .contentType(ApiProblem.MEDIA_TYPE);
            for (String action : List.of("pause", "resume", "cancel")) {
                authorized().urlEncodingEnabled(false).post("/subscriptions/" + id + "/backfills/" + bid + "/" + action)
                        .then().statusCode(404).contentType(ApiProblem.MEDIA_TYPE);
            }
        }
        // a backfill belongs to its subscription: another one does not have it
        authorized().get("/subscriptions/" + other + "/backfills/" + backfill).then().statusCode(404)
                .contentType(ApiProblem.MEDIA_TYPE);
        control(other, backfill, "cancel").statusCode(404);
        authorized().get("/subscriptions/" + other + "/backfills").then().statusCode(200).body("$", empty());
        assertThat(state(id, backfill)).isEqualTo("running");
        control(id, backfill, "cancel").statusCode(200).body("state", equalTo("cancelled"));
    }

    @Test
    void theReadTokenReadsBackfillsButCannotStartOrControlThem() throws Exception {
        sql("CREATE TABLE bft_items (id int PRIMARY KEY)", "INSERT INTO bft_items SELECT generate_series(1, 300)");
        String id = subscription("read-token", "public.bft_items");
        String backfill = start(id, "{" + SLOW + "}").statusCode(202).extract().path("id");
        reader().get("/subscriptions/" + id + "/backfills").then().statusCode(200).body("id", contains(backfill));
        reader().get("/subscriptions/" + id + "/backfills/" + backfill).then().statusCode(200)
                .body("state", equalTo("running"));
        reader().contentType("application/json").body("{\"chunk_size\": 10}").post("/subscriptions/" + id + "/backfills")
                .then().statusCode(403).contentType(ApiProblem.MEDIA_TYPE)
                .body("detail", containsString("WALHOOK_API_READ_TOKEN"));
        reader().contentType("application/json").post("/subscriptions/" + id + "/backfills").then().statusCode(403)
                .contentType(ApiProblem.MEDIA_TYPE);
        for (String action : List.of("pause", "resume", "cancel")) {
            reader().post("/subscriptions/" + id + "/backfills/" + backfill + "/" + action).then().statusCode(403)
                    .contentType(ApiProblem.MEDIA_TYPE);
        }
        // without a token, not even a read
        given().filter(OpenApiContract.responsesOnly()).get("/subscriptions/" + id + "/backfills").then().statusCode(401)
                .header("WWW-Authenticate", startsWith("Bearer")).contentType(ApiProblem.MEDIA_TYPE);
        authorized().get("/subscriptions/" + id + "/backfills").then().statusCode(200)
                .body("id", contains(backfill)).body("state", everyItem(equalTo("running")));
        control(id, backfill, "cancel").statusCode(200);
        authorized().get("/subscriptions/" + id + "/backfills").then().statusCode(200).body("state", hasItem("cancelled"))
                .body("[0].tables[0].table", endsWith("bft_items"));
    }
}
