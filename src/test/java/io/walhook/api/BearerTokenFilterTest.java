package io.walhook.api;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Optional;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Who may do what: every combination of configured tokens, presented token and method. */
class BearerTokenFilterTest {

    @ParameterizedTest(name = "token {0}, read token {1}: {2} with ''{3}'' -> {4}")
    @CsvSource(nullValues = "none", delimiter = '|', value = {
        // nothing configured: everything is refused, saying how to set a token
        "none  | none | GET    | Bearer w     | 401 Set WALHOOK_API_TOKEN",
        "none  | none | POST   | none         | 401 Set WALHOOK_API_TOKEN",
        "'  '  | ''   | GET    | Bearer       | 401 Set WALHOOK_API_TOKEN",
        // the token allows everything
        "w     | none | GET    | Bearer w     | ok",
        "w     | none | DELETE | Bearer w     | ok",
        "w     | none | POST   | bearer   w   | ok",
        "' w ' | none | PUT    | Bearer w     | ok",
        "w     | r    | POST   | Bearer w     | ok",
        // no, another or a differently sent token
        "w     | none | GET    | none         | 401 send 'Authorization: Bearer <WALHOOK_API_TOKEN>'",
        "w     | none | GET    | Bearer       | 401 send 'Authorization: Bearer <WALHOOK_API_TOKEN>'",
        "w     | none | GET    | Basic w      | 401 send 'Authorization: Bearer <WALHOOK_API_TOKEN>'",
        "w     | none | GET    | w            | 401 send 'Authorization: Bearer <WALHOOK_API_TOKEN>'",
        "w     | none | GET    | Bearer ww    | 401 the bearer token is not WALHOOK_API_TOKEN",
        "w     | none | GET    | Bearer W     | 401 the bearer token is not WALHOOK_API_TOKEN",
        "w     | none | POST   | Bearer r     | 401 the bearer token is not WALHOOK_API_TOKEN",
        // the read token allows GET and HEAD only
        "w     | r    | GET    | Bearer r     | ok",
        "w     | r    | HEAD   | Bearer r     | ok",
        "w     | r    | POST   | Bearer r     | 403 WALHOOK_API_READ_TOKEN allows GET requests only",
        "w     | r    | DELETE | Bearer r     | 403 this DELETE needs WALHOOK_API_TOKEN",
        "w     | r    | GET    | Bearer x     | 401 the bearer token is not WALHOOK_API_TOKEN or WALHOOK_API_READ_TOKEN",
        "w     | r    | POST   | Bearer x     | 401 the bearer token is not WALHOOK_API_TOKEN",
        // a read token alone: reads work, writes are disabled
        "none  | r    | GET    | Bearer r     | ok",
        "none  | r    | POST   | Bearer r     | 403 this POST needs WALHOOK_API_TOKEN",
        "none  | r    | POST   | none         | 401 Set WALHOOK_API_TOKEN",
        "none  | r    | GET    | Bearer x     | 401 the bearer token is not WALHOOK_API_READ_TOKEN",
    })
    void refusesWhatTheTokenDoesNotAllow(String token, String readToken, String method, String authorization,
            String expected) {
        ApiProblem problem = new BearerTokenFilter(Optional.ofNullable(token), Optional.ofNullable(readToken))
                .refusal(method, authorization);
        if (expected.equals("ok")) {
            assertThat(problem).as(problem == null ? "" : problem.getMessage()).isNull();
            return;
        }
        assertThat(problem).isNotNull();
        jakarta.ws.rs.core.Response response = problem.toResponse();
        assertThat(response.getStatus()).isEqualTo(Integer.parseInt(expected.substring(0, 3)));
        assertThat(problem.getMessage()).contains(expected.substring(4));
        assertThat(response.getMediaType().toString()).isEqualTo(ApiProblem.MEDIA_TYPE);
        if (response.getStatus() == 401) {
            assertThat(response.getHeaderString("WWW-Authenticate")).startsWith("Bearer");
        }
    }
}
