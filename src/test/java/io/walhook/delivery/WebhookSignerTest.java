package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.List;
import java.util.Optional;

import org.junit.jupiter.api.Test;

class WebhookSignerTest {

    /** The Standard Webhooks specification's published example. */
    private static final byte[] SPEC_KEY = Base64.getDecoder().decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");

    @Test
    void reproducesTheStandardWebhooksExample() {
        String signature = WebhookSigner.sign(List.of(SPEC_KEY), "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                "{\"test\": 2432232314}".getBytes(StandardCharsets.UTF_8));
        assertThat(signature).isEqualTo("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    @Test
    void signsWithEverySecretDuringRotation() {
        byte[] other = new byte[32];
        String signature = WebhookSigner.sign(List.of(SPEC_KEY, other), "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                "{\"test\": 2432232314}".getBytes(StandardCharsets.UTF_8));
        String[] parts = signature.split(" ");
        assertThat(parts).hasSize(2);
        assertThat(parts[0]).isEqualTo("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assertThat(parts[1]).startsWith("v1,").isNotEqualTo(parts[0]);
    }

    @Test
    void classifiesOutcomesOnce() {
        assertThat(WebhookTransport.classify(200)).isEqualTo(Transport.Outcome.DELIVERED);
        assertThat(WebhookTransport.classify(204)).isEqualTo(Transport.Outcome.DELIVERED);
        assertThat(WebhookTransport.classify(410)).isEqualTo(Transport.Outcome.GONE);
        assertThat(WebhookTransport.classify(429)).isEqualTo(Transport.Outcome.RETRY);
        assertThat(WebhookTransport.classify(500)).isEqualTo(Transport.Outcome.RETRY);
        assertThat(WebhookTransport.classify(400)).isEqualTo(Transport.Outcome.RETRY);
        assertThat(WebhookTransport.classify(301)).isEqualTo(Transport.Outcome.RETRY);
    }

    @Test
    void readsRetryAfterAsSecondsOrHttpDate() {
        Instant now = Instant.parse("2026-11-29T16:00:00Z");
        assertThat(WebhookTransport.retryAfter("7", now)).contains(Duration.ofSeconds(7));
        assertThat(WebhookTransport.retryAfter("Sun, 29 Nov 2026 16:00:30 GMT", now)).contains(Duration.ofSeconds(30));
        assertThat(WebhookTransport.retryAfter("Sun, 29 Nov 2026 15:00:00 GMT", now)).contains(Duration.ZERO);
        assertThat(WebhookTransport.retryAfter("soon", now)).isEqualTo(Optional.empty());
        assertThat(WebhookTransport.retryAfter("-3", now)).isEqualTo(Optional.empty());
        // more seconds than any wait walhook makes, up to more than a long holds: the longest, never an overflow
        assertThat(WebhookTransport.retryAfter("99999999999999999", now)).contains(WebhookTransport.LONGEST_RETRY_AFTER);
        assertThat(WebhookTransport.retryAfter("999999999999999999999999", now))
                .contains(WebhookTransport.LONGEST_RETRY_AFTER);
        assertThat(WebhookTransport.retryAfter("Fri, 31 Dec 9999 23:59:59 GMT", now))
                .contains(WebhookTransport.LONGEST_RETRY_AFTER);
    }

    /**
     * RFC 9110 (5.6.7): a recipient reads the two obsolete forms of an HTTP date too, and a wrong
     * weekday does not make a date nonsense. They were ignored, and the request retried on its own
     * backoff, sooner than the receiver asked.
     */
    @Test
    void readsRetryAfterInTheObsoleteDateFormsAndWithAWrongWeekday() {
        Instant now = Instant.parse("2026-11-29T16:00:00Z");
        assertThat(WebhookTransport.retryAfter("Sunday, 29-Nov-26 16:00:30 GMT", now)).contains(Duration.ofSeconds(30));
        assertThat(WebhookTransport.retryAfter("Sun Nov 29 16:00:30 2026", now)).contains(Duration.ofSeconds(30));
        assertThat(WebhookTransport.retryAfter("Sun Nov  1 16:00:00 2026", now)).contains(Duration.ZERO);
        assertThat(WebhookTransport.retryAfter("Mon, 29 Nov 2026 16:00:30 GMT", now)).contains(Duration.ofSeconds(30));
        // a two-digit year more than 50 years ahead is the last century's: long past
        assertThat(WebhookTransport.retryAfter("Sunday, 06-Nov-94 08:49:37 GMT", now)).contains(Duration.ZERO);
        assertThat(WebhookTransport.retryAfter("Sun, 31 Nov 2026 16:00:30 GMT", now)).isEqualTo(Optional.empty());
        assertThat(WebhookTransport.retryAfter("Sun, 29 Nov 2026 16:00:30 +0000", now)).contains(Duration.ofSeconds(30));
        assertThat(WebhookTransport.retryAfter("Sun, 29 Nov 2026 16:00:30 CET", now)).isEqualTo(Optional.empty());
    }
}
