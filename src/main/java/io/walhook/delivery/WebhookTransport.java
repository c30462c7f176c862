package io.walhook.delivery;

import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Map;
import java.util.Optional;

import io.walhook.routing.Destination;

/**
 * HTTP POSTs with the Standard Webhooks headers to one webhook destination: a 2xx is delivered,
 * 410 Gone is gone, anything else, a timeout or a connection error is retried, honouring
 * {@code Retry-After}. One JDK client is shared by every destination (HTTP/1.1 keep-alive for
 * http, HTTP/2 where TLS negotiates it).
 */
public final class WebhookTransport implements Transport {

    private final HttpClient http;
    private final Destination.Webhook destination;
    private final Clock clock;
    private final Duration timeout;

    public WebhookTransport(HttpClient http, Destination.Webhook destination, Clock clock, Duration timeout) {
        this.http = http;
        this.destination = destination;
        this.clock = clock;
        this.timeout = timeout;
    }

    /** The client every webhook transport shares: no redirects (a redirect is a failure), a short connect timeout. */
    public static HttpClient client() {
        return HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).followRedirects(HttpClient.Redirect.NEVER)
                .build();
    }

    @Override
    public Attempt attempt(Dispatcher.Request request) throws InterruptedException {
        try {
            HttpResponse<Void> response = http.send(request(destination, request.id(), request.body(),
                    request.contentType(), request.headers(), clock.instant().getEpochSecond(), timeout),
                    HttpResponse.BodyHandlers.discarding());
            Outcome outcome = classify(response.statusCode());
            String problem = response.statusCode() == 410 ? "410 Gone" : "HTTP " + response.statusCode();
            return new Attempt(outcome, outcome == Outcome.RETRY ? response.headers().firstValue("retry-after")
                    .flatMap(v -> retryAfter(v, clock.instant())) : Optional.empty(), problem);
        } catch (IOException e) {
            return Attempt.retry(e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage()));
        }
    }

    /**
     * One POST to a webhook destination with the Standard Webhooks headers (signed when the
     * destination has secrets), the format's headers and the destination's own.
     */
    public static HttpRequest request(Destination.Webhook destination, String id, byte[] body, String contentType,
            Map<String, String> formatHeaders, long timestamp, Duration timeout) {
        HttpRequest.Builder request = HttpRequest.newBuilder(destination.url()).timeout(timeout)
                // HTTP/2 where TLS negotiates it; no h2c upgrade dance with plain-HTTP receivers
                .version("https".equals(destination.url().getScheme()) ? HttpClient.Version.HTTP_2
                        : HttpClient.Version.HTTP_1_1)
                .POST(HttpRequest.BodyPublishers.ofByteArray(body))
                .header("content-type", contentType)
                .header("user-agent", "walhook")
                .header("webhook-id", id)
                .header("webhook-timestamp", Long.toString(timestamp));
        if (!destination.secrets().isEmpty()) {
            request.header("webhook-signature", WebhookSigner.sign(destination.secrets(), id, timestamp, body));
        }
        formatHeaders.forEach(request::header);
        destination.headers().forEach(request::header);
        return request.build();
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

    @Override
    public String toString() {
        return destination.url().toString();
    }
}
