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
        assertThat(WebhookSender.classify(200)).isEqualTo(WebhookSender.Outcome.DELIVERED);
        assertThat(WebhookSender.classify(204)).isEqualTo(WebhookSender.Outcome.DELIVERED);
        assertThat(WebhookSender.classify(410)).isEqualTo(WebhookSender.Outcome.GONE);
        assertThat(WebhookSender.classify(429)).isEqualTo(WebhookSender.Outcome.RETRY);
        assertThat(WebhookSender.classify(500)).isEqualTo(WebhookSender.Outcome.RETRY);
        assertThat(WebhookSender.classify(400)).isEqualTo(WebhookSender.Outcome.RETRY);
        assertThat(WebhookSender.classify(301)).isEqualTo(WebhookSender.Outcome.RETRY);
    }

    @Test
    void readsRetryAfterAsSecondsOrHttpDate() {
        Instant now = Instant.parse("2026-11-29T16:00:00Z");
        assertThat(WebhookSender.retryAfter("7", now)).contains(Duration.ofSeconds(7));
        assertThat(WebhookSender.retryAfter("Sun, 29 Nov 2026 16:00:30 GMT", now)).contains(Duration.ofSeconds(30));
        assertThat(WebhookSender.retryAfter("Sun, 29 Nov 2026 15:00:00 GMT", now)).contains(Duration.ZERO);
        assertThat(WebhookSender.retryAfter("soon", now)).isEqualTo(Optional.empty());
        assertThat(WebhookSender.retryAfter("-3", now)).isEqualTo(Optional.empty());
    }
}
