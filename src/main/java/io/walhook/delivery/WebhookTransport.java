package io.walhook.delivery;

import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

import io.walhook.routing.Destination;

/**
 * HTTP POSTs with the Standard Webhooks headers to one webhook destination: a 2xx is delivered,
 * 410 Gone is gone, anything else, a timeout or a connection error is retried, honouring
 * {@code Retry-After}. One {@link WebhookClient} is shared by every destination. With
 * {@code publicOnly} (subscriptions created through the API, unless private destinations are
 * allowed) every request checks the address it connects to ({@link DestinationPolicy}).
 */
public final class WebhookTransport implements Transport {

    /** The longest {@code Retry-After} taken as given; anything longer counts as this. */
    static final Duration LONGEST_RETRY_AFTER = Duration.ofDays(1);

    private final WebhookClient http;
    private final Destination.Webhook destination;
    private final Clock clock;
    private final Duration timeout;
    private final boolean publicOnly;
    private final DestinationGate gate;

    public WebhookTransport(WebhookClient http, Destination.Webhook destination, Clock clock, Duration timeout,
            boolean publicOnly) {
        this.http = http;
        this.destination = destination;
        this.clock = clock;
        this.timeout = timeout;
        this.publicOnly = publicOnly;
        this.gate = http.gate(destination.url());
    }

    @Override
    public DestinationGate gate() {
        return gate;
    }

    @Override
    public CompletableFuture<Attempt> send(Request request) {
        CompletableFuture<WebhookClient.Response> response = http.postAsync(gate, destination, request.id(), request.body(),
                request.contentType(), request.headers(), clock.instant().getEpochSecond(), timeout, publicOnly);
        CompletableFuture<Attempt> attempt = response.handle((answer, failure) -> {
            if (failure != null) {
                Throwable cause = failure instanceof CompletionException && failure.getCause() != null
                        ? failure.getCause() : failure;
                return Attempt.retry(cause instanceof IOException ? cause.getMessage()
                        : WebhookClient.describe(cause));
            }
            Outcome outcome = classify(answer.status());
            String problem = answer.status() == 410 ? "410 Gone" : "HTTP " + answer.status();
            // what a 429 or a 5xx asks is the receiver's (or its proxy's) own pace; a refusal's, that request's
            return new Attempt(outcome, outcome == Outcome.RETRY && answer.retryAfter() != null
                    ? retryAfter(answer.retryAfter(), clock.instant()) : Optional.empty(), problem,
                    answer.status() == 429 || answer.status() >= 500);
        });
        // given up by the caller before it ended: the client resets it, which frees its connection
        attempt.whenComplete((done, failure) -> response.completeExceptionally(new IOException("given up")));
        return attempt;
    }

    static Outcome classify(int status) {
        if (status >= 200 && status < 300) {
            return Outcome.DELIVERED;
        }
        return status == 410 ? Outcome.GONE : Outcome.RETRY;
    }

    /** {@code Retry-After}: seconds or an HTTP date; nonsense is ignored, and a huge value is {@link #LONGEST_RETRY_AFTER}. */
    static Optional<Duration> retryAfter(String value, Instant now) {
        String v = value.strip();
        if (!v.isEmpty() && v.chars().allMatch(Character::isDigit)) {
            // digits only: seconds, however many of them
            if (v.length() > 9) {
                return Optional.of(LONGEST_RETRY_AFTER);
            }
            Duration seconds = Duration.ofSeconds(Long.parseLong(v));
            return Optional.of(seconds.compareTo(LONGEST_RETRY_AFTER) > 0 ? LONGEST_RETRY_AFTER : seconds);
        }
        try {
            Instant at = ZonedDateTime.parse(v, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant();
            Duration wait = Duration.between(now, at);
            return Optional.of(wait.isNegative() ? Duration.ZERO
                    : wait.compareTo(LONGEST_RETRY_AFTER) > 0 ? LONGEST_RETRY_AFTER : wait);
        } catch (DateTimeParseException | ArithmeticException notDate) {
            return Optional.empty();
        }
    }

    /** Log lines name the destination by this: never its query string, header values or a path segment that may be a credential. */
    @Override
    public String toString() {
        return destination.loggedUrl();
    }
}
