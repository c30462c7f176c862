package io.walhook.api;

import static io.restassured.RestAssured.given;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

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
        "GET    | /subscriptions/%zz                    | /subscriptions/x",
        "GET    | /subscriptions/%                      | /subscriptions/x",
        "GET    | /subscriptions/%4                     | /subscriptions/x",
        "DELETE | /subscriptions/%zz                    | /subscriptions/x",
        "POST   | /subscriptions/%zz/pause              | /subscriptions/x/pause",
        "GET    | /subscriptions/%zz/dead-letters       | /subscriptions/x/dead-letters",
        "GET    | /subscriptions/%C3%28                 | /subscriptions/x",
        "GET    | /subscriptions/a<b                    | /subscriptions/x",
        "PUT    | /subscriptions/[x]                    | /subscriptions/x",
    })
    void badPercentEncodingInThePathIsAProblemNamingThePath(String method, String target, String documented)
            throws Exception {
        RawHttp.Response response = RawHttp.exchange(method, target, documented, TOKEN, null);
        assertThat(response.status()).as(response.toString()).isEqualTo(400);
        assertThat(response.contentType()).startsWith(ApiProblem.MEDIA_TYPE);
        assertThat(response.body()).contains("\"status\":400").contains(target);
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
}
