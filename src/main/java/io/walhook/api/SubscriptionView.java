package io.walhook.api;

import java.util.List;

import io.quarkus.runtime.annotations.RegisterForReflection;
import io.walhook.routing.Destination;
import io.walhook.routing.Subscription;

/**
 * A subscription as the API shows it ({@code Subscription} in openapi.yaml): the secret replaced
 * by whether one is set, the headers by their names, the URL without its query string. What a
 * subscription leaves unset (filter, columns, its own retry and limits) is left out.
 */
@RegisterForReflection
public record SubscriptionView(String id, String name, boolean readOnly, boolean paused, List<String> tables,
        List<String> operations, String filter, DestinationView destination, String format, BatchView batch,
        ColumnsView columns, RetryView retry, Integer maxInFlight, RateLimitView rateLimit) {

    static SubscriptionView of(String id, Subscription s, boolean paused) {
        ColumnsView columns = s.projection().isAll() ? null
                : new ColumnsView(sorted(s.projection().include()), sorted(s.projection().exclude()));
        // the subscription's own settings, as given: what it leaves out follows WALHOOK_DELIVERY_*
        RetryView retry = s.retry().isDefault() ? null : new RetryView(s.retry().maxAttempts().orElse(null),
                s.retry().maxBackoff().map(java.time.Duration::toMillis).orElse(null),
                s.retry().window().map(java.time.Duration::toMillis).orElse(null));
        return new SubscriptionView(id, s.name(), s.readOnly(), paused, s.tables().stream().map(t -> t.text()).toList(),
                s.operations().stream().sorted().map(o -> o.wireName()).toList(),
                s.filter().map(f -> f.expression()).orElse(null), DestinationView.of(s.destination()),
                s.format().wireName(), new BatchView(s.batchMaxEvents(), s.batchMaxWaitMs()), columns, retry,
                s.limits().maxInFlight().orElse(null),
                s.limits().rate().map(r -> new RateLimitView(r.requests(), r.period().wireName())).orElse(null));
    }

    private static List<String> sorted(java.util.Collection<String> names) {
        return names.stream().sorted().toList();
    }

    /** A webhook's {@code url}, {@code secret_set} and {@code headers_set}, or an AMQP {@code address}. */
    @RegisterForReflection
    public record DestinationView(String type, String url, Boolean secretSet, List<String> headersSet, String address) {

        static DestinationView of(Destination destination) {
            if (destination instanceof Destination.Webhook webhook) {
                // the query string and header values are credentials as often as the secret is: written, never shown
                return new DestinationView("webhook", webhook.redactedUrl(), !webhook.secrets().isEmpty(),
                        sorted(webhook.headers().keySet()), null);
            }
            return new DestinationView("amqp", null, null, null, ((Destination.Amqp) destination).address());
        }
    }

    @RegisterForReflection
    public record BatchView(int maxEvents, long maxWaitMs) {
    }

    @RegisterForReflection
    public record ColumnsView(List<String> include, List<String> exclude) {
    }

    @RegisterForReflection
    public record RetryView(Integer maxAttempts, Long maxBackoffMs, Long windowMs) {
    }

    @RegisterForReflection
    public record RateLimitView(int requests, String per) {
    }
}
