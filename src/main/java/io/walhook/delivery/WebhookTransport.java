package io.walhook.delivery;

import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
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
        Optional<Instant> at = httpDate(v, now);
        if (at.isEmpty()) {
            return Optional.empty();
        }
        Duration wait = Duration.between(now, at.get());
        return Optional.of(wait.isNegative() ? Duration.ZERO
                : wait.compareTo(LONGEST_RETRY_AFTER) > 0 ? LONGEST_RETRY_AFTER : wait);
    }

    /**
     * IMF-fixdate ({@code Sun, 06 Nov 1994 08:49:37 GMT}) and the obsolete RFC 850 form ({@code
     * Sunday, 06-Nov-94 ...}); UTC written as {@code +0000}, {@code UT} or {@code UTC} too, as
     * RFC 1123 dates were read before.
     */
    private static final java.util.regex.Pattern FIXDATE = java.util.regex.Pattern.compile(
            "(?:[A-Za-z]{3,9}, ?)?(?<day>\\d{1,2})[ -](?<month>[A-Za-z]{3})[ -](?<year>\\d{4}|\\d{2})"
            + " (?<hour>\\d{2}):(?<minute>\\d{2}):(?<second>\\d{2}) (?:GMT|UTC?|[+-]0000)");
    /** The obsolete asctime form: {@code Sun Nov  6 08:49:37 1994}. */
    private static final java.util.regex.Pattern ASCTIME = java.util.regex.Pattern.compile(
            "[A-Za-z]{3} (?<month>[A-Za-z]{3}) +(?<day>\\d{1,2}) (?<hour>\\d{2}):(?<minute>\\d{2}):(?<second>\\d{2})"
            + " (?<year>\\d{4})");
    private static final List<String> MONTHS = List.of("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
            "nov", "dec");

    /**
     * An HTTP date in any of the three forms a recipient must read (RFC 9110, 5.6.7), its weekday not
     * checked against its date (a server's wrong weekday does not make the date nonsense); a
     * two-digit year more than 50 years ahead of {@code now} is the last century's.
     */
    static Optional<Instant> httpDate(String value, Instant now) {
        java.util.regex.Matcher date = FIXDATE.matcher(value);
        if (!date.matches() && !(date = ASCTIME.matcher(value)).matches()) {
            return Optional.empty();
        }
        int year = Integer.parseInt(date.group("year"));
        if (date.group("year").length() == 2) {
            int thisYear = now.atZone(java.time.ZoneOffset.UTC).getYear();
            year += thisYear - Math.floorMod(thisYear, 100);
            if (year > thisYear + 50) {
                year -= 100;
            }
        }
        int month = MONTHS.indexOf(date.group("month").toLowerCase(java.util.Locale.ROOT)) + 1;
        try {
            return Optional.of(java.time.LocalDateTime.of(year, month, Integer.parseInt(date.group("day")),
                    Integer.parseInt(date.group("hour")), Integer.parseInt(date.group("minute")),
                    Integer.parseInt(date.group("second"))).toInstant(java.time.ZoneOffset.UTC));
        } catch (java.time.DateTimeException notADate) {
            return Optional.empty(); // the 31st of November, hour 25, no such month
        }
    }

    /** Log lines name the destination by this: never its query string, header values or a path segment that may be a credential. */
    @Override
    public String toString() {
        return destination.loggedUrl();
    }
}
