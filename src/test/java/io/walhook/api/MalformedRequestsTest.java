package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;

import java.util.Locale;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import io.quarkus.test.common.QuarkusTestResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.specification.RequestSpecification;

/**
 * Requests malformed in their path, query, body or headers each get a documented
 * {@code application/problem+json} answer naming what is wrong, never a bare status and never a
 * guess at what was meant.
 */
@QuarkusTest
@QuarkusTestResource(value = SubscriptionApiTest.Resource.class, restrictToAnnotatedClass = true)
@ExtendWith(OpenApiContract.class)
class MalformedRequestsTest {

    private static final String BODY = "{\"name\": \"%s\", \"tables\": [\"public.orders\"], \"destination\":"
            + " {\"type\": \"webhook\", \"url\": \"https://93.184.216.34/hook\"}}";
    private static final Map<String, String> TOKEN = Map.of("Authorization", "Bearer " + SubscriptionApiTest.TOKEN);

    private static RequestSpecification authorized() {
        return given().header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN).contentType("application/json");
    }

    private static String create(String name) {
        return authorized().body(BODY.formatted(name)).post("/subscriptions").then().statusCode(201).extract().path("id");
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "GET    | /subscriptions/%zz                    | /subscriptions/x                   | id",
        "GET    | /subscriptions/%                      | /subscriptions/x                   | id",
        "GET    | /subscriptions/%4                     | /subscriptions/x                   | id",
        "DELETE | /subscriptions/%zz                    | /subscriptions/x                   | id",
        "POST   | /subscriptions/%zz/pause              | /subscriptions/x/pause             | id",
        "GET    | /subscriptions/%zz/dead-letters       | /subscriptions/x/dead-letters      | id",
        "GET    | /subscriptions/%C3%28                 | /subscriptions/x                   | id",
        "GET    | /subscriptions/a<b                    | /subscriptions/x                   | id",
        "PUT    | /subscriptions/[x]                    | /subscriptions/x                   | id",
        "GET    | /subscriptions/x/backfills/%zz        | /subscriptions/x/backfills/y       | bid",
        "POST   | /subscriptions/x/backfills/a<b/cancel | /subscriptions/x/backfills/y/cancel | bid",
        "GET    | /subscriptions/x/%zz                  | /subscriptions/x                   | path",
        "GET    | /subscriptions?limit=<5               | /subscriptions                     | limit",
        "GET    | /subscriptions/x/dead-letters?limit=1&after=a^b | /subscriptions/x/dead-letters | after",
        "GET    | http://127.0.0.1/subscriptions/a<b/backfills/y | /subscriptions/x/backfills/y | id",
    })
    void badPercentEncodingInThePathIsAProblemNamingThePath(String method, String target, String documented,
            String field) throws Exception {
        RawHttp.Response response = RawHttp.exchange(method, target, documented, TOKEN, null);
        assertThat(response.status()).as(response.toString()).isEqualTo(400);
        assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
        assertThat(response.body()).contains("\"status\":400").contains(target)
                .as("the path parameter it holds, or the path").contains("\"field\":\"" + field + "\"");
    }

    /**
     * A method the resource does not take is a 405 with an {@code Allow} header listing those it does
     * (RFC 9110, 15.5.6: the server MUST send it); it had none, and a client could not tell what to use.
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "DELETE | /status                              | GET, HEAD, OPTIONS",
        "POST   | /subscriptions/x                     | DELETE, GET, HEAD, OPTIONS, PATCH, PUT",
        "GET    | /subscriptions/x/pause               | OPTIONS, POST",
        "PUT    | /subscriptions                       | GET, HEAD, OPTIONS, POST",
        "PATCH  | /subscriptions/x/backfills/y         | GET, HEAD, OPTIONS",
        "GET    | /subscriptions/x/dead-letters/replay | OPTIONS, POST",
    })
    void aMethodTheResourceDoesNotTakeIsAnsweredWithTheMethodsItDoes(String method, String target, String allowed)
            throws Exception {
        RawHttp.Response response = RawHttp.exchangeUndocumented(method, target, TOKEN);
        assertThat(response.status()).as(response.toString()).isEqualTo(405);
        assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
        assertThat(response.headers().get("allow")).as(response.toString()).isNotNull();
        assertThat(java.util.Arrays.stream(response.headers().get("allow").split(",")).map(String::strip).sorted()
                .collect(java.util.stream.Collectors.joining(", "))).isEqualTo(allowed);
        assertThat(response.body()).contains("\"status\":405");
        for (String also : java.util.List.of("HEAD", "OPTIONS")) {
            if (allowed.contains(also)) {
                // taken (a 404 is the subscription x, which does not exist)
                assertThat(RawHttp.exchangeUndocumented(also, target, TOKEN).status()).as(also + " " + target + ", as Allow says")
                        .isNotIn(405, 500);
            }
        }
    }

    /**
     * A subscription's body is a few KB: one of megabytes is refused before it is read, as a
     * problem (a body read whole, and its JSON tree some ten times its size, would take the heap the
     * stream shares). Quarkus's own refusal of a body over its limit is a bare 413.
     */
    @Test
    void aBodyLargerThanOneMebibyteIsAProblemBeforeItIsRead() throws Exception {
        // a client that writes its whole body before it reads (as most do) gets the answer: the body is
        // read and thrown away, not left unread under a closed socket, which would reset the connection
        // and fail the client's write (20 MiB is more than a socket's buffers take)
        for (int repeat : new int[] {1 << 18, 1 << 22}) { // 1.25 and 20 MiB
            String large = "{\"name\": \"large\", \"tables\": [" + "\"t\", ".repeat(repeat) + "\"t\"]}";
            RawHttp.Response response = RawHttp.exchange("POST", "/subscriptions", "/subscriptions",
                    java.util.Map.of("Authorization", "Bearer " + SubscriptionApiTest.TOKEN, "Content-Type", "application/json"), large);
            assertThat(response.status()).as(response.toString()).isEqualTo(413);
            assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
            assertThat(response.body()).contains("\"status\":413").contains("1 MiB");
        }
        // a connection kept alive is closed once the body is thrown away (the answer read to the connection's end),
        // and closed after the answer when the 10 MB said to follow do not come
        String head = "POST /subscriptions HTTP/1.1\r\nHost: 127.0.0.1:" + io.restassured.RestAssured.port
                + "\r\nAuthorization: Bearer " + SubscriptionApiTest.TOKEN + "\r\nContent-Type: application/json\r\n"
                + "Content-Length: 10485760\r\n\r\n";
        for (String request : new String[] {head + "x".repeat(10 << 20), head}) {
            RawHttp.Response response = RawHttp.exchangeHead(request, "POST", "/subscriptions");
            assertThat(response.status()).as(response.toString()).isEqualTo(413);
            assertThat(response.headers()).containsEntry("connection", "close");
        }
    }

    @jakarta.inject.Inject
    io.vertx.core.Vertx vertx;

    /**
     * Over HTTP/2, a stream whose body is refused is answered, then reset with NO_ERROR: the client
     * stops sending and keeps the answer (RFC 9113, 8.1). It was left open, the client's writes
     * waiting for flow-control credit that never came.
     */
    @Test
    void anHttp2StreamWithABodyLargerThanOneMebibyteIsAnsweredThenReset() throws Exception {
        io.vertx.core.http.HttpClient client = vertx.createHttpClient(new io.vertx.core.http.HttpClientOptions()
                .setProtocolVersion(io.vertx.core.http.HttpVersion.HTTP_2).setHttp2ClearTextUpgrade(false));
        java.util.concurrent.CompletableFuture<String> answer = new java.util.concurrent.CompletableFuture<>();
        java.util.concurrent.CompletableFuture<Throwable> reset = new java.util.concurrent.CompletableFuture<>();
        int total = 20 << 20;
        try {
            client.request(new io.vertx.core.http.RequestOptions().setMethod(io.vertx.core.http.HttpMethod.POST)
                    .setHost("127.0.0.1").setPort(io.restassured.RestAssured.port).setURI("/subscriptions")
                    .putHeader("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                    .putHeader("Content-Type", "application/json").putHeader("Content-Length", String.valueOf(total)))
                    .onFailure(answer::completeExceptionally)
                    .onSuccess(request -> {
                        request.exceptionHandler(reset::complete);
                        request.response().onSuccess(response -> response.body().onSuccess(body -> answer.complete(
                                response.version() + " " + response.statusCode() + " " + body)));
                        writeFrom(request, io.vertx.core.buffer.Buffer.buffer(new byte[64 << 10]), total);
                    });
            assertThat(answer.get(30, java.util.concurrent.TimeUnit.SECONDS)).startsWith("HTTP_2 413 ")
                    .contains("\"status\":413").contains("1 MiB");
            assertThat(reset.get(30, java.util.concurrent.TimeUnit.SECONDS))
                    .isInstanceOfSatisfying(io.vertx.core.http.StreamResetException.class, e -> assertThat(e.getCode()).isZero());
        } finally {
            client.close();
        }
    }

    /** Writes {@code left} bytes of {@code chunk}s, waiting for the stream's credit whenever its queue is full. */
    private static void writeFrom(io.vertx.core.http.HttpClientRequest request, io.vertx.core.buffer.Buffer chunk, int left) {
        int at = left;
        while (at > 0 && !request.writeQueueFull()) {
            request.write(at >= chunk.length() ? chunk : chunk.slice(0, at));
            at -= Math.min(at, chunk.length());
        }
        if (at == 0) {
            request.end();
            return;
        }
        int rest = at;
        request.drainHandler(drained -> writeFrom(request, chunk, rest));
    }

    @Test
    void badPercentEncodingInAQueryValueIsAProblemNamingTheParameter() throws Exception {
        String id = create("percent");
        RawHttp.Response response = RawHttp.exchange("GET", "/subscriptions/" + id + "/dead-letters?limit=%zz",
                "/subscriptions/x/dead-letters", TOKEN, null);
        assertThat(response.status()).as(response.toString()).isEqualTo(400);
        assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
        assertThat(response.body()).contains("\"field\":\"limit\"");
        // whatever the operation, and whether it reads the parameter or not
        response = RawHttp.exchange("GET", "/status?since=%e2%28", "/status", TOKEN, null);
        assertThat(response.status()).as(response.toString()).isEqualTo(400);
        assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
        assertThat(response.body()).contains("\"field\":\"since\"");
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "GET    | /status?verbose=true                  | verbose",
        "GET    | /status?x=                            | x",
        "GET    | /subscriptions/{id}?fields=name       | fields",
        "PUT    | /subscriptions/{id}?force             | force",
        "POST   | /subscriptions/{id}/pause?until=later | until",
        "POST   | /subscriptions/{id}/test?x=1          | x",
        "GET    | /subscriptions/{id}/backfills?state=  | state",
        "DELETE | /subscriptions/{id}?cascade=true      | cascade",
    })
    void aQueryParameterTheOperationDoesNotTakeIsAProblemNamingIt(String method, String target, String parameter) {
        String name = "unread-" + parameter + "-" + method.toLowerCase(Locale.ROOT);
        String id = create(name);
        RequestSpecification request = given().filter(OpenApiContract.responsesOnly())
                .header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN);
        if (method.equals("PUT")) {
            request = request.contentType("application/json").body(BODY.formatted(name));
        }
        request.request(method, target.replace("{id}", id)).then().statusCode(400)
                .contentType("application/problem+json").body("field", equalTo(parameter))
                .body("detail", containsString("'" + parameter + "' is not a query parameter of this operation, which takes none"));
        // and the operation did nothing
        authorized().get("/subscriptions/" + id).then().statusCode(200);
    }

    /** "?=5": a parameter without a name was placed at the body ("" is the body's field); the query is the place. */
    @Test
    void aQueryParameterWithoutANameIsPlacedAtTheQuery() throws Exception {
        // sent as written: RestAssured reads a query in the path and writes it again ("=5" became "5")
        for (String target : java.util.List.of("/subscriptions?=5", "/subscriptions?=%zz")) {
            RawHttp.Response response = RawHttp.exchange("GET", target, "/subscriptions", TOKEN, null);
            assertThat(response.status()).as(response.toString()).isEqualTo(400);
            assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
            assertThat(response.body()).as(target).contains("\"field\":\"query\"");
        }
    }

    @Test
    void aCreateWithAQueryItDoesNotTakeCreatesNothing() {
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .contentType("application/json").body(BODY.formatted("dry-run")).post("/subscriptions?dry_run=true")
                .then().statusCode(400)
                .body("field", equalTo("dry_run"));
        assertThat(authorized().get("/subscriptions?limit=1000").then().statusCode(200).extract().<java.util.List<String>>path("name"))
                .doesNotContain("dry-run");
    }

    /**
     * A body sent to a write that takes none is refused, not ignored: dead-letter ids given as a
     * JSON body dropped the whole queue (none in the query means all), and a pause "with paused
     * false" paused. Without a body, or with an empty one or {@code {}}, the same writes go through.
     */
    @Test
    void aBodySentToAWriteThatTakesNoneDoesNothing() {
        String id = create("bodiless");
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .contentType("application/json").body("{\"id\": [17]}").delete("/subscriptions/" + id + "/dead-letters")
                .then().statusCode(400).contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo(""))
                .body("detail", containsString("?id=1&id=2"));
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .contentType("application/json").body("{\"paused\": false}").post("/subscriptions/" + id + "/pause")
                .then().statusCode(400).body("detail", containsString("takes no body"));
        assertThat(authorized().get("/subscriptions/" + id).then().statusCode(200).extract().<Boolean>path("paused"))
                .as("not paused by the refused request").isFalse();
        given().header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN).post("/subscriptions/" + id + "/pause")
                .then().statusCode(200).body("paused", equalTo(true));
        given().header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN).contentType("application/json").body("")
                .post("/subscriptions/" + id + "/resume").then().statusCode(200).body("paused", equalTo(false));
        // {} says nothing (some clients send it with every POST): let through
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .contentType("application/json").body("{}").post("/subscriptions/" + id + "/pause").then().statusCode(200)
                .body("paused", equalTo(true));
        // nor do {} with blanks inside, [] or null
        for (String nothing : new String[] {"{ }", " [ ]\n", "null"}) {
            given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                    .contentType("application/json").body(nothing).post("/subscriptions/" + id + "/resume").then()
                    .statusCode(200).body("paused", equalTo(false));
        }
        given().header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN).delete("/subscriptions/" + id + "/dead-letters")
                .then().statusCode(200);
    }

    /**
     * A chunked body has no Content-Length: judged by that alone, it was let through unread, and a
     * chunked {@code {"id": [17]}} to {@code DELETE .../dead-letters} dropped every dead letter.
     * Each write that takes no body reads it, however sent, and refuses one that says something.
     */
    @ParameterizedTest
    @ValueSource(strings = {"POST {s}/pause", "POST {s}/resume", "POST {s}/test", "DELETE {s}", "POST {s}/dead-letters/replay",
            "DELETE {s}/dead-letters", "POST {s}/backfills/{b}/pause", "POST {s}/backfills/{b}/resume",
            "POST {s}/backfills/{b}/cancel"})
    void aChunkedBodySentToAWriteThatTakesNoneDoesNothing(String operation) throws Exception {
        String id = create("chunked-" + Math.abs(operation.hashCode()));
        String method = operation.substring(0, operation.indexOf(' '));
        String path = operation.substring(operation.indexOf(' ') + 1).replace("{s}", "/subscriptions/" + id)
                .replace("{b}", java.util.UUID.randomUUID().toString());
        String said = "{\"id\": [17], \"paused\": false}";
        RawHttp.Response response = RawHttp.exchangeHead(chunked(method, path, said), method, path);
        assertThat(response.status()).as(response.toString()).isEqualTo(400);
        assertThat(response.body()).contains("takes no body");
        assertThat(authorized().get("/subscriptions/" + id).then().statusCode(200).extract().<Boolean>path("paused"))
                .as("neither paused nor deleted by the refused request").isFalse();
        // chunked and saying nothing: let through, as with a length
        for (String nothing : new String[] {"", "{ }", "null"}) {
            if (!method.equals("DELETE") && !path.endsWith("/test") || path.contains("dead-letters")) {
                // (not the delete itself, and not a test fired at a destination that may never answer)
                assertThat(RawHttp.exchangeHead(chunked(method, path, nothing), method, path).body())
                        .doesNotContain("takes no body");
            }
        }
        authorized().delete("/subscriptions/" + id);
    }

    /** A request sending {@code body} in one chunk (none when empty), then the last chunk. */
    private static String chunked(String method, String path, String body) {
        byte[] bytes = body.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + io.restassured.RestAssured.port
                + "\r\nAuthorization: Bearer " + SubscriptionApiTest.TOKEN + "\r\nContent-Type: application/json\r\n"
                + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + (bytes.length == 0 ? "" : Integer.toHexString(bytes.length) + "\r\n" + body + "\r\n") + "0\r\n\r\n";
    }

    @Test
    void aRequestWithoutTheTokenIsRefusedForThatWhateverItsQuery() {
        given().filter(OpenApiContract.responsesOnly()).get("/status?verbose=true").then().statusCode(401);
    }

    @Test
    void anAcceptHeaderThatAllowsNoJsonIsAProblem() {
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .accept("text/html").get("/status").then().statusCode(406).contentType(ApiProblem.MEDIA_TYPE);
        given().header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN).accept("text/html, */*;q=0.1")
                .get("/status").then().statusCode(200).contentType("application/json");
        // answers are application/json, problems application/problem+json whatever the Accept: an Accept of problems
        // alone allows no answer
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .accept("application/problem+json").get("/status").then().statusCode(406).contentType(ApiProblem.MEDIA_TYPE);
    }

    @Test
    void aRequestWithoutAHostHeaderIsAProblem() throws Exception {
        RawHttp.Response response = RawHttp.exchangeHead("GET /status HTTP/1.1\r\nAuthorization: Bearer "
                + SubscriptionApiTest.TOKEN + "\r\nConnection: close\r\n\r\n", "GET", "/status");
        assertThat(response.status()).as(response.toString()).isEqualTo(400);
        assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
        assertThat(response.body()).contains("Host");
    }

    /**
     * A Host in brackets that is no IPv6 address passed Vert.x, and the create's answer, whose
     * Location is made from it, failed after the subscription was stored: a 500 for a write
     * that had been done (tried again, a 409). It is refused before anything is done.
     */
    @ParameterizedTest
    @ValueSource(strings = {"[x]", "[x]:8080", "[::1"})
    void aHostThatIsNoHostIsAProblemBeforeAnythingIsWritten(String host) throws Exception {
        String body = BODY.formatted("bracketed");
        byte[] content = body.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        RawHttp.Response response = RawHttp.exchangeHead("POST /subscriptions HTTP/1.1\r\nHost: " + host
                + "\r\nAuthorization: Bearer " + SubscriptionApiTest.TOKEN + "\r\nContent-Type: application/json\r\n"
                + "Content-Length: " + content.length + "\r\nConnection: close\r\n\r\n" + body, "POST", "/subscriptions");
        assertThat(response.status()).as(response.toString()).isEqualTo(400);
        assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
        assertThat(response.body()).contains("Host");
        assertThat(authorized().get("/subscriptions?limit=1000").then().statusCode(200).extract().<java.util.List<String>>path("name"))
                .doesNotContain("bracketed");
    }

    @ParameterizedTest
    @ValueSource(strings = {" xyz", " {}", "{}", " []", "]", " \"x\"", " 1", "\u0000"})
    void anythingAfterTheJsonBodyIsABadRequest(String after) {
        String body = BODY.formatted("trailing") + after;
        authorized().filter(OpenApiContract.responsesOnly()).body(body).post("/subscriptions").then().statusCode(400)
                .contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo("")).body("detail", containsString("after"));
        String id = create("trailing-put");
        authorized().filter(OpenApiContract.responsesOnly()).body(body).put("/subscriptions/" + id).then().statusCode(400)
                .contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo(""));
        authorized().delete("/subscriptions/" + id).then().statusCode(200);
    }

    @Test
    void twoJsonDocumentsInOneBodyAreABadRequest() {
        authorized().filter(OpenApiContract.responsesOnly()).body("{} {}").post("/subscriptions").then().statusCode(400)
                .contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo("")).body("detail", containsString("after"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"*/*", "application/*", "*/json", "application/json-patch+json", "text/json"})
    void aWriteWhoseContentTypeIsNotJsonIsUnsupported(String contentType) {
        given().filter(OpenApiContract.responsesOnly()).header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .contentType(contentType).body(BODY.formatted("wildcard").getBytes(java.nio.charset.StandardCharsets.UTF_8))
                .post("/subscriptions").then().statusCode(415).contentType(ApiProblem.MEDIA_TYPE)
                .body("detail", containsString("application/json"));
    }

    @Test
    void aWriteWithoutAContentTypeIsUnsupported() throws Exception {
        RawHttp.Response response = RawHttp.exchange("POST", "/subscriptions", "/subscriptions", TOKEN,
                BODY.formatted("untyped"));
        assertThat(response.status()).as(response.toString()).isEqualTo(415);
        assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
        assertThat(response.body()).contains("application/json");
    }

    @Test
    void jsonWithACharsetOrInUpperCaseIsJson() {
        String id = given().header("Authorization", "Bearer " + SubscriptionApiTest.TOKEN)
                .contentType("Application/JSON; charset=utf-8").body(BODY.formatted("charset"))
                .post("/subscriptions").then().statusCode(201).extract().path("id");
        authorized().delete("/subscriptions/" + id).then().statusCode(200);
    }

    /** A UUID is the same id in either case; walhook answers with its canonical, lower-case form. */
    @Test
    void anIdInUpperCaseIsAnsweredWithItsCanonicalForm() {
        String id = create("shouting");
        String upper = id.toUpperCase(Locale.ROOT);
        assertThat(upper).isNotEqualTo(id);
        authorized().get("/subscriptions/" + upper).then().statusCode(200).body("id", equalTo(id));
        authorized().body(BODY.formatted("shouting")).put("/subscriptions/" + upper).then().statusCode(200)
                .body("id", equalTo(id));
        authorized().post("/subscriptions/" + upper + "/pause").then().statusCode(200).body("id", equalTo(id));
        authorized().post("/subscriptions/" + upper + "/resume").then().statusCode(200).body("id", equalTo(id));
        authorized().get("/subscriptions/" + upper + "/dead-letters?limit=1").then().statusCode(200);
        authorized().delete("/subscriptions/" + upper).then().statusCode(200);
        authorized().get("/subscriptions/" + id).then().statusCode(404).body("detail", containsString(id));
    }

    @Test
    void anIdThatIsNotACanonicalUuidIsNoSubscription() {
        // java.util.UUID reads 1-1-1-1-1 as 00000001-0001-0001-0001-000000000001; walhook does not
        authorized().get("/subscriptions/1-1-1-1-1").then().statusCode(404).contentType(ApiProblem.MEDIA_TYPE)
                .body("detail", containsString("1-1-1-1-1"));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "\"filter\": null,                                   | /filter",
        "\"format\": null,                                   | /format",
        "\"operations\": null,                               | /operations",
        "\"tables\": null,                                   | /tables",
        "\"batch\": null,                                    | /batch",
        "\"batch\": {\"max_events\": null},                  | /batch/max_events",
        "\"columns\": {\"include\": null},                   | /columns/include",
        "\"retry\": {\"window_ms\": null},                   | /retry/window_ms",
        "\"retry\": null,                                    | /retry",
    })
    void jsonNullForAFieldThatIsNotNullableIsABadRequestNamingIt(String field, String pointer) {
        String body = BODY.formatted("nulls").replace("\"tables\": [\"public.orders\"], ", field + " ");
        authorized().filter(OpenApiContract.responsesOnly()).body(body).post("/subscriptions").then().statusCode(400)
                .contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo(pointer)).body("detail", containsString("null"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"\"secret\": null", "\"headers\": null", "\"headers\": {\"X-Key\": null}"})
    void jsonNullInTheDestinationIsABadRequestNamingIt(String field) {
        String body = BODY.formatted("nulls").replace("\"type\": \"webhook\",", "\"type\": \"webhook\", " + field + ",");
        // a header's name is not repeated (it may be a whole header pasted, credential and all): its position is
        String pointer = "/destination/" + (field.contains("X-Key") ? "headers" : field.replaceAll("\"(\\w+)\".*", "$1"));
        authorized().filter(OpenApiContract.responsesOnly()).body(body).post("/subscriptions").then().statusCode(400)
                .contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo(pointer));
    }

    /** A whole header pasted as a name, its credential too, is refused without being repeated. */
    @Test
    void aHeaderNameThatIsNoHeaderNameIsRefusedWithoutRepeatingIt() {
        String body = BODY.formatted("pasted").replace("\"type\": \"webhook\",",
                "\"type\": \"webhook\", \"headers\": {\"X-Fine\": \"1\", \"Authorization: Bearer s3cr3t-pasted\": \"\"},");
        String answer = authorized().filter(OpenApiContract.responsesOnly()).body(body).post("/subscriptions").then()
                .statusCode(400).contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo("/destination/headers"))
                .body("detail", containsString("header 2's name is not a header name")).extract().asString();
        assertThat(answer).doesNotContain("s3cr3t");
    }

    /**
     * A name that is no field name, a whole header pasted one level too high, given twice, or with
     * a null or a NUL, is refused without being repeated: problems are logged by proxies and clients.
     */
    @ParameterizedTest
    @ValueSource(strings = {
        "\"Authorization: Bearer s3cr3t-pasted\": \"x\",",
        "\"X-Api-Key s3cr3t-pasted\": null,",
        "\"Authorization: Bearer s3cr3t-pasted\": 1, \"Authorization: Bearer s3cr3t-pasted\": 2,",
        "\"x'Bearer s3cr3t-pasted\": 1, \"x'Bearer s3cr3t-pasted\": 2,",
    })
    void aFieldNameThatIsNoFieldNameIsRefusedWithoutRepeatingIt(String pasted) {
        for (String body : java.util.List.of(BODY.formatted("pasted").replace("\"type\": \"webhook\",", "\"type\": \"webhook\", " + pasted),
                BODY.formatted("pasted").replaceFirst("\\{", "{" + pasted))) {
            String answer = authorized().filter(OpenApiContract.responsesOnly()).body(body).post("/subscriptions").then()
                    .statusCode(400).contentType(ApiProblem.MEDIA_TYPE).extract().asString();
            assertThat(answer).as(body).doesNotContain("s3cr3t");
        }
    }

    /** A dead-letter key is one JSON object and nothing after it: {"id":1}x was read as {"id":1}. */
    @ParameterizedTest
    @ValueSource(strings = {"{\"id\":1}x", "{\"id\":1}{\"id\":2}", "{\"id\":1,\"id\":2}"})
    void aDeadLetterKeyWithMoreThanOneObjectIsRefused(String key) {
        String id = create("keyed");
        authorized().queryParam("key", key).get("/subscriptions/" + id + "/dead-letters").then().statusCode(400)
                .contentType(ApiProblem.MEDIA_TYPE).body("field", equalTo("key"));
        authorized().queryParam("key", "{\"id\":1}").get("/subscriptions/" + id + "/dead-letters").then().statusCode(200);
        authorized().delete("/subscriptions/" + id).then().statusCode(200);
    }
}
