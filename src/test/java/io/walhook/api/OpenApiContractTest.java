package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import com.sun.net.httpserver.HttpServer;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;

import io.quarkus.test.junit.QuarkusTest;
import io.restassured.specification.RequestSpecification;

/**
 * The contract check itself bites: against a stand-in server answering what the test tells it
 * to, a response or request that openapi.yaml does not allow fails the RestAssured call, one it
 * allows passes, and every API test is wired to the check.
 */
@ExtendWith(OpenApiContract.class)
class OpenApiContractTest {

    private static final String STATUS_OK = "{\"role\": \"active\", \"slot\": {\"name\": \"walhook\", \"exists\": true}, \"server_lsn\": \"0/16B3748\","
            + " \"subscriptions\": []}";
    private static final String PROBLEM = "{\"title\": \"Not Found\", \"status\": 404, \"detail\": \"no subscription x\"}";
    private static final String VIEW = "{\"id\": \"1\", \"name\": \"x\", \"read_only\": false, \"paused\": false,"
            + " \"tables\": [\"*\"], \"operations\": [\"insert\"], \"destination\": {\"type\": \"webhook\","
            + " \"url\": \"https://example.com/\", \"secret_set\": false}, \"format\": \"json\","
            + " \"batch\": {\"max_events\": 1, \"max_wait_ms\": 0}}";

    private static HttpServer server;
    private static volatile int status;
    private static volatile String contentType;
    private static volatile String body;

    @BeforeAll
    static void startStandIn() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", exchange -> {
            exchange.getRequestBody().readAllBytes();
            byte[] bytes = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
            if (contentType != null) {
                exchange.getResponseHeaders().set("Content-Type", contentType);
            }
            exchange.sendResponseHeaders(status, bytes.length == 0 ? -1 : bytes.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        });
        server.start();
    }

    @AfterAll
    static void stopStandIn() {
        server.stop(0);
    }

    private static RequestSpecification answering(int code, String type, String json) {
        status = code;
        contentType = type;
        body = json;
        return given().baseUri("http://127.0.0.1").port(server.getAddress().getPort()).header("Authorization", "Bearer t");
    }

    @Test
    void aResponseTheContractAllowsPassesAndIsCounted() {
        int before = OpenApiContract.CHECKED.get();
        answering(200, "application/json", STATUS_OK).get("/status").then().statusCode(200);
        answering(404, "application/problem+json", PROBLEM).get("/subscriptions/x").then().statusCode(404);
        answering(201, "application/json", VIEW).contentType("application/json")
                .body("{\"name\": \"x\", \"destination\": {\"type\": \"webhook\", \"url\": \"https://example.com/\"}}")
                .post("/subscriptions").then().statusCode(201);
        answering(200, "application/json", "{\"id\": \"x\", \"discarded_events\": 0}").delete("/subscriptions/x")
                .then().statusCode(200);
        assertThat(OpenApiContract.CHECKED.get()).isEqualTo(before + 4);
    }

    @Test
    void aBodyMissingARequiredFieldFails() {
        assertThatThrownBy(() -> answering(200, "application/json", STATUS_OK.replace("\"server_lsn\"", "\"lsn\""))
                .get("/status"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("GET /status -> 200 breaks openapi.yaml")
                .hasMessageContaining("server_lsn");
    }

    @Test
    void aFieldTheContractDoesNotDocumentFails() {
        assertThatThrownBy(() -> answering(200, "application/json", STATUS_OK.replace("{\"role\"", "{\"secret\": \"x\", \"role\""))
                .get("/status"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("additionalProperties").hasMessageContaining("secret");
    }

    @Test
    void aValueOfTheWrongShapeFails() {
        assertThatThrownBy(() -> answering(200, "application/json", STATUS_OK.replace("0/16B3748", "16B3748")).get("/status"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("pattern");
        assertThatThrownBy(() -> answering(200, "application/json", VIEW.replace("\"json\"", "\"xml\"")).get("/subscriptions/1"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("enum");
    }

    @Test
    void anUndocumentedStatusFails() {
        assertThatThrownBy(() -> answering(502, "application/problem+json", PROBLEM.replace("404", "502"))
                .get("/subscriptions/x"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("validation.response.status.unknown");
    }

    @Test
    void anUndocumentedContentTypeFails() {
        assertThatThrownBy(() -> answering(404, "text/plain", "not found").get("/subscriptions/x"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("validation.response.contentType.notAllowed");
        assertThatThrownBy(() -> answering(404, "application/json", PROBLEM).get("/subscriptions/x"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("validation.response.contentType.notAllowed");
    }

    @Test
    void aPathOrMethodTheContractDoesNotHaveFails() {
        assertThatThrownBy(() -> answering(200, "application/json", "{}").get("/subscription"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("validation.request.path.missing");
        assertThatThrownBy(() -> answering(200, "application/json", "{}").patch("/status"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("validation.request.operation.notAllowed");
    }

    @Test
    void aRequestWithoutTheBearerTokenFails() {
        answering(200, "application/json", STATUS_OK);
        assertThatThrownBy(() -> given().baseUri("http://127.0.0.1").port(server.getAddress().getPort()).get("/status"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("validation.request.security.missing");
    }

    @Test
    void aRequestTheContractDoesNotAllowFailsUnlessSentAsDeliberatelyMalformed() {
        assertThatThrownBy(() -> answering(201, "application/json", VIEW)
                .contentType("application/json").body("{\"name\": \"x\"}").post("/subscriptions"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("destination");
        answering(400, "application/problem+json", PROBLEM.replace("404", "400")).filter(OpenApiContract.responsesOnly())
                .contentType("application/json").body("{\"name\": \"x\"}")
                .post("/subscriptions").then().statusCode(400);
        // a deliberately malformed request still gets its response checked
        assertThatThrownBy(() -> answering(400, "text/html", "<h1>Bad</h1>").filter(OpenApiContract.responsesOnly())
                .contentType("application/json").body("{nope").post("/subscriptions"))
                .isInstanceOf(AssertionError.class).hasMessageContaining("validation.response.contentType.notAllowed");
    }

    /**
     * Every operation documents each status it can answer, as a problem: 400 (any request's path or
     * query can be badly percent-encoded), 401 (no or wrong token), 403 for a write (the read
     * token), 404 for one subscription, 406 (an Accept header that allows no JSON), 415 for a body,
     * 503 (the state tables are in the source database) and 500.
     */
    @Test
    void everyOperationDocumentsTheProblemsItCanAnswer() {
        io.swagger.v3.oas.models.OpenAPI api = OpenApiContract.parse(OpenApiContract.SPEC);
        java.util.List<String> missing = new java.util.ArrayList<>();
        api.getPaths().forEach((path, item) -> item.readOperationsMap().forEach((method, operation) -> {
            java.util.Set<String> expected = new java.util.TreeSet<>(java.util.List.of("400", "401", "406", "500", "503"));
            if (method != io.swagger.v3.oas.models.PathItem.HttpMethod.GET) {
                expected.add("403");
            }
            if (path.contains("{")) {
                expected.add("404");
            }
            if (operation.getRequestBody() != null) {
                expected.add("415");
            }
            for (String status : expected) {
                io.swagger.v3.oas.models.responses.ApiResponse response = operation.getResponses().get(status);
                if (response == null || response.getContent() == null
                        || !response.getContent().containsKey(ApiProblem.MEDIA_TYPE)) {
                    missing.add(method + " " + path + " " + status);
                }
            }
        }));
        assertThat(missing).as("statuses an operation can answer that openapi.yaml does not document as a problem")
                .isEmpty();
    }

    @Test
    void quarkusEndpointsAreNotPartOfTheContract() {
        answering(200, "text/plain", "# metrics").get("/q/metrics").then().statusCode(200);
    }

    @Test
    void everyApiTestIsCheckedAgainstTheContract() {
        JavaClass[] quarkusTests = new ClassFileImporter().withImportOption(ImportOption.Predefined.ONLY_INCLUDE_TESTS)
                .importPackages("io.walhook.api").stream()
                .filter(c -> c.isAnnotatedWith(QuarkusTest.class)).toArray(JavaClass[]::new);
        assertThat(quarkusTests).extracting(JavaClass::getSimpleName)
                .contains("ApplicationTest", "SubscriptionApiTest", "SubscriptionApiDeliveryTest", "HostileBodiesTest",
                        "MalformedRequestsTest");
        assertThat(quarkusTests).allSatisfy(c -> assertThat(c.tryGetAnnotationOfType(ExtendWith.class))
                .as(c.getSimpleName() + " has @ExtendWith(OpenApiContract.class)")
                .hasValueSatisfying(e -> assertThat(Arrays.asList(e.value())).contains(OpenApiContract.class)));
    }
}
