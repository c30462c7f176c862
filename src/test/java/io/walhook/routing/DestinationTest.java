package io.walhook.routing;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** A webhook destination shows itself without its credentials: the URL's query string, user info and header values. */
class DestinationTest {

    private static Destination.Webhook webhook(String url, Map<String, String> headers) {
        return new Destination.Webhook(URI.create(url), List.of(), headers);
    }

    @ParameterizedTest
    @CsvSource({
        "https://hooks.example.com:8443/a/b?token=s3cr3t#part, https://hooks.example.com:8443/a/b",
        "https://hooks.example.com/a/b?token=s3cr3t,           https://hooks.example.com/a/b",
        "http://user:pa55word@10.0.0.1:8080/h,                 http://10.0.0.1:8080/h",
        "http://[::1]:9/x?q=1,                                 http://[::1]:9/x",
        "http://h/,                                            http://h/",
        "http://h,                                             http://h",
        "http://h/a%20b?x=%2F,                                 http://h/a%20b",
    })
    void theRedactedUrlIsSchemeHostPortAndPath(String url, String redacted) {
        Destination.Webhook destination = webhook(url, Map.of());
        assertThat(destination.redactedUrl()).isEqualTo(redacted);
        assertThat(destination.toString()).isEqualTo("webhook " + redacted);
    }

    @Test
    void anHttpClientMessageQuotingTheRequestLosesItsCredentials() {
        Destination.Webhook destination = webhook("https://u:pa55word@hooks.example.com:8443/a/b?token=s3cr3t&n=1#frag",
                Map.of("X-Api-Key", "h3ader-value", "X-Short", "1"));
        assertThat(destination.redact("The timeout period of 1000ms has been exceeded while executing POST"
                + " /a/b?token=s3cr3t&n=1 for server hooks.example.com:8443"))
                .isEqualTo("The timeout period of 1000ms has been exceeded while executing POST /a/b for server"
                        + " hooks.example.com:8443");
        assertThat(destination.redact("cannot reach https://u:pa55word@hooks.example.com:8443/a/b?token=s3cr3t&n=1#frag"))
                .isEqualTo("cannot reach https://hooks.example.com:8443/a/b");
        assertThat(destination.redact("rejected key h3ader-value, user u:pa55word, token s3cr3t, 1 of 10"))
                .isEqualTo("rejected key [redacted], user [redacted], token [redacted], 1 of 10");
        assertThat(destination.redact(null)).isNull();
    }

    @Test
    void aPercentEncodedQueryValueIsTakenOutInEitherForm() {
        Destination.Webhook destination = webhook("https://h/p?token=s%33cr%33t%2Bx", Map.of());
        assertThat(destination.redact("token=s3cr3t+x or s%33cr%33t%2Bx")).isEqualTo("[redacted] or [redacted]");
    }
}
