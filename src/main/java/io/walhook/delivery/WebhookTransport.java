package io.walhook.delivery;

import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Optional;

import io.walhook.routing.Destination;

/**
 * HTTP POSTs with the Standard Webhooks headers to one webhook destination: a 2xx is delivered,
 * 410 Gone is gone, anything else, a timeout or a connection error is retried, honouring
 * {@code Retry-After}. One {@link WebhookClient} is shared by every destination.
 */
public final class WebhookTransport implements Transport {

    private final WebhookClient http;
    private final Destination.Webhook destination;
    private final Clock clock;
    private final Duration timeout;

    public WebhookTransport(WebhookClient http, Destination.Webhook destination, Clock clock, Duration timeout) {
        this.http = http;
        this.destination = destination;
        this.clock = clock;
        this.timeout = timeout;
    }

    @Override
    public Attempt attempt(Dispatcher.Request request) throws InterruptedException {
        try {
            WebhookClient.Response response = http.post(destination, request.id(), request.body(), request.contentType(),
                    request.headers(), clock.instant().getEpochSecond(), timeout);
            Outcome outcome = classify(response.status());
            String problem = response.status() == 410 ? "410 Gone" : "HTTP " + response.status();
            return new Attempt(outcome, outcome == Outcome.RETRY && response.retryAfter() != null
                    ? retryAfter(response.retryAfter(), clock.instant()) : Optional.empty(), problem);
        } catch (IOException e) {
            return Attempt.retry(e.getMessage());
        }
    }

    static Outcome classify(int status) {
        if (status >= 200 && status < 300) {
            return Outcome.DELIVERED;
        }
        return status == 410 ? Outcome.GONE : Outcome.RETRY;
    }

    /** {@code Retry-After}: seconds or an HTTP date; nonsense is ignored. */
    static Optional<Duration> retryAfter(String value, Instant now) {
        String v = value.strip();
        try {
            long seconds = Long.parseLong(v);
            return seconds < 0 ? Optional.empty() : Optional.of(Duration.ofSeconds(seconds));
        } catch (NumberFormatException notSeconds) {
            try {
                Instant at = ZonedDateTime.parse(v, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant();
                Duration wait = Duration.between(now, at);
                return Optional.of(wait.isNegative() ? Duration.ZERO : wait);
            } catch (DateTimeParseException notDate) {
                return Optional.empty();
            }
        }
    }

    /** Log lines name the destination by this: never its query string or header values. */
    @Override
    public String toString() {
        return destination.redactedUrl();
    }
}
