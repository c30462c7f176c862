package io.walhook.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.nio.charset.StandardCharsets;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What a problem with a write request's body says: where it is and what is wrong, never the
 * caller's values (a secret typed without quotes is not echoed into a 400 that proxies log).
 */
class JsonBodyTest {

    private static ApiProblem refused(String body) {
        return catchThrowableOfType(ApiProblem.class,
                () -> JsonBody.parse("application/json", body.getBytes(StandardCharsets.UTF_8), "subscription"));
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "{\"destination\": {\"secret\": whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}}",
        "{\"destination\": {\"headers\": {\"Authorization\": Bearer-MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}}}",
        "{\"destination\": {\"secret\": tMfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}}",
        "{\"destination\": {\"secret\": \"whsec_x\" MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}}",
        "{\"n\": 1MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}",
    })
    void invalidJsonIsPlacedNotQuoted(String body) {
        ApiProblem problem = refused(body);
        assertThat(problem.status()).isEqualTo(400);
        assertThat(problem.getMessage()).startsWith("the body is not valid JSON at line 1, column ")
                .doesNotContain("MfKQ9r8").doesNotContain("Bearer");
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "{\"columns\": {\"include\": [\"id\", \"a\\u0000b\"]}}  | /columns/include/1",
        "{\"filter\": \"new.a == '\\u0000'\"}                    | /filter",
        "{\"destination\": {\"type\": \"amqp\", \"address\": \"q\\u0000\"}} | /destination/address",
        "{\"a\\u0000\": 1}                                       | ''",
    })
    void aNulCharacterAnywhereIsRefusedWhereItIs(String body, String field) {
        assertRefusedAt(body, field, "NUL");
    }

    private static void assertRefusedAt(String body, String field, String saying) {
        ApiProblem problem = refused(body);
        assertThat(problem.status()).isEqualTo(400);
        assertThat(problem.toJson()).contains("\"field\":\"" + field + "\""); // as JSON writes it
        assertThat(problem.getMessage()).contains(saying);
    }

    /**
     * A lone surrogate escape is no character: the state database's driver wrote it as '?', so
     * {@code https://x/hook\ud800y} was stored as {@code https://x/hook?y}, a path cut short and a
     * query added, while the answer showed the URL as sent. A pair (an emoji) is a character.
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "{\"destination\": {\"type\": \"webhook\", \"url\": \"https://x/hook\\ud800y\"}} | /destination/url",
        "{\"filter\": \"new.a == '\\udc00'\"}                   | /filter",
        "{\"tables\": [\"public.a\", \"public.b\\ud83d\"]}          | /tables/1",
        "{\"name\": \"\\udc00\\ud800\"}                          | /name",
    })
    void aLoneSurrogateAnywhereIsRefusedWhereItIs(String body, String field) {
        assertRefusedAt(body, field, "surrogate");
        assertThat(JsonBody.wellFormed("\ud83d\ude00 a")).isTrue();
        assertThat(JsonBody.wellFormed("\ud83d")).isFalse();
    }

    /**
     * A header's name is the caller's text, and can be a whole header pasted as one
     * ({@code "Authorization: Bearer ..."}): a null or NUL under it is placed at the headers,
     * without the name.
     */
    @ParameterizedTest
    @ValueSource(strings = {
        "{\"destination\": {\"headers\": {\"Authorization: Bearer MfKQ9r8GKYqrTw\": null}}}",
        "{\"destination\": {\"headers\": {\"Authorization: Bearer MfKQ9r8GKYqrTw\": \"a\\u0000\"}}}",
        "{\"destination\": {\"headers\": {\"Authorization: Bearer MfKQ9r8GKYqrTw\\u0000\": \"a\"}}}",
    })
    void aHeadersNameIsNotRepeated(String body) {
        ApiProblem problem = refused(body);
        assertThat(problem.status()).isEqualTo(400);
        assertThat(problem.toJson()).contains("\"field\":\"/destination/headers\"").doesNotContain("MfKQ9r8")
                .doesNotContain("Bearer");
    }

    /**
     * Valid JSON past what any field takes (a text of more than 20,000 characters, a number of more
     * than 30 digits, values nested more than 20 deep) was refused as "not valid JSON", naming no
     * field: a text or number is named now, as a field's own bound names it (a header's name is not
     * repeated); nesting is the body's as a whole.
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "{\"filter\": \"LONG\"}                                     | /filter              | a text longer than 20000",
        "{\"tables\": [\"public.a\", \"LONG\"]}                     | /tables/1            | a text longer than 20000",
        "{\"max_in_flight\": 1000000000000000000000000000000}          | /max_in_flight       | a number of more than 30 digits",
        "{\"destination\": {\"headers\": {\"Authorization: Bearer MfKQ9r8GKYqrTw\": \"LONG\"}}} | /destination/headers | a text longer",
        "{\"a\": DEEP}                                                | ''                   | the body nests values more than 20",
    })
    void aValuePastWhatAnyFieldTakesIsRefusedNamingIt(String body, String field, String detail) {
        ApiProblem problem = refused(body.replace("LONG", "x".repeat(20_001)).replace("DEEP", "[".repeat(20) + "]".repeat(20)));
        assertThat(problem.status()).isEqualTo(400);
        assertThat(problem.toJson()).contains("\"field\":\"" + field + (field.isEmpty() ? "\"" : ""))
                .doesNotContain("MfKQ9r8");
        assertThat(problem.getMessage()).contains(detail).doesNotContain("xxxx");
    }

    /** A field given twice: the last one won, so a second, empty filter undid the first. */
    @ParameterizedTest
    @ValueSource(strings = {
        "{\"name\": \"a\", \"filter\": \"new.tenant_id == 42\", \"filter\": \"true\"}",
        "{\"destination\": {\"headers\": {\"X-Tenant\": \"1\", \"X-Tenant\": \"2\"}}}",
    })
    void aFieldGivenTwiceIsRefusedNamingIt(String body) {
        ApiProblem problem = refused(body);
        assertThat(problem.status()).isEqualTo(400);
        assertThat(problem.getMessage()).contains("Duplicate field");
    }
}
