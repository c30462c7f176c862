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
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

import org.jboss.logging.Logger;

import io.walhook.change.ChangeEvent;
import io.walhook.routing.Destination;
import io.walhook.routing.EventEncoder;
import io.walhook.routing.Subscription;

/**
 * Sends each subscription's events as HTTP POSTs, one at a time per subscription in commit
 * order, with the Standard Webhooks headers. A 2xx is delivered; 429, 5xx, timeouts and connection
 * errors are retried with exponential backoff and full jitter, honouring {@code Retry-After};
 * 410 Gone disables the subscription (until restart); other 4xx are retried like 5xx, since
 * dropping a change is never silent. (Per-key lanes, batching and durable parking come next.)
 */
public final class WebhookSender implements RoutingLoop.Sender, AutoCloseable {

    private static final Logger LOG = Logger.getLogger(WebhookSender.class);
    private static final Duration MIN_BACKOFF = Duration.ofMillis(200);

    /** How an attempt ended, decided once. */
    enum Outcome { DELIVERED, RETRY, GONE }

    private record Job(ChangeEvent event, EventEncoder.Encoded body, Runnable done) {
    }

    private final HttpClient http;
    private final Clock clock;
    private final Duration requestTimeout;
    private final Duration maxBackoff;
    private final Map<String, Lane> lanes = new ConcurrentHashMap<>();
    private final Set<String> disabled = ConcurrentHashMap.newKeySet();

    public WebhookSender(Clock clock, Duration requestTimeout, Duration maxBackoff) {
        this.clock = clock;
        this.requestTimeout = requestTimeout;
        this.maxBackoff = maxBackoff;
        this.http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5))
                .followRedirects(HttpClient.Redirect.NEVER).build();
    }

    @Override
    public void send(Subscription subscription, ChangeEvent event, EventEncoder.Encoded body, Runnable done)
            throws InterruptedException {
        if (!(subscription.destination() instanceof Destination.Webhook)) {
            throw new IllegalArgumentException(subscription.name() + " is not a webhook subscription");
        }
        if (disabled.contains(subscription.name())) {
            done.run();
            return;
        }
        lanes.computeIfAbsent(subscription.name(), name -> new Lane(subscription)).queue.put(new Job(event, body, done));
    }

    /** Whether a 410 disabled the subscription. */
    public boolean isDisabled(String subscription) {
        return disabled.contains(subscription);
    }

    @Override
    public void close() {
        lanes.values().forEach(lane -> lane.thread.interrupt());
    }

    /** One subscription's queue and the thread that delivers it in order. */
    private final class Lane implements Runnable {
        final Subscription subscription;
        final Destination.Webhook destination;
        final BlockingQueue<Job> queue = new ArrayBlockingQueue<>(1000);
        final Thread thread;

        Lane(Subscription subscription) {
            this.subscription = subscription;
            this.destination = (Destination.Webhook) subscription.destination();
            this.thread = new Thread(this, "walhook-webhook-" + subscription.name());
            thread.setDaemon(true);
            thread.start();
        }

        @Override
        public void run() {
            try {
                while (!Thread.currentThread().isInterrupted()) {
                    Job job = queue.take();
                    deliver(job);
                    job.done().run();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        private void deliver(Job job) throws InterruptedException {
            String id = job.event().id();
            long backoff = MIN_BACKOFF.toMillis();
            for (int attempt = 1; ; attempt++) {
                if (disabled.contains(subscription.name())) {
                    return;
                }
                Optional<Duration> retryAfter = Optional.empty();
                String problem;
                try {
                    HttpResponse<Void> response = http.send(request(job, id), HttpResponse.BodyHandlers.discarding());
                    Outcome outcome = classify(response.statusCode());
                    if (outcome == Outcome.DELIVERED) {
                        return;
                    }
                    if (outcome == Outcome.GONE) {
                        disabled.add(subscription.name());
                        LOG.errorf("subscription %s disabled: %s answered 410 Gone to event %s", subscription.name(),
                                destination.url(), id);
                        return;
                    }
                    retryAfter = response.headers().firstValue("retry-after").flatMap(v -> retryAfter(v, clock.instant()));
                    problem = "HTTP " + response.statusCode();
                } catch (IOException e) {
                    problem = e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
                }
                // Retry-After is honoured (bounded); otherwise exponential backoff with full jitter
                long wait = retryAfter.isPresent() ? Math.min(retryAfter.get().toMillis(), maxBackoff.toMillis() * 10)
                        : Math.max(ThreadLocalRandom.current().nextLong(0, backoff + 1), 50);
                LOG.warnf("subscription %s: event %s attempt %d to %s failed (%s); retrying in %d ms", subscription.name(),
                        id, attempt, destination.url(), problem, wait);
                Thread.sleep(wait);
                backoff = Math.min(backoff * 2, maxBackoff.toMillis());
            }
        }

        private HttpRequest request(Job job, String id) {
            long timestamp = clock.instant().getEpochSecond();
            HttpRequest.Builder request = HttpRequest.newBuilder(destination.url()).timeout(requestTimeout)
                    .POST(HttpRequest.BodyPublishers.ofByteArray(job.body().body()))
                    .header("content-type", job.body().contentType())
                    .header("user-agent", "walhook")
                    .header("webhook-id", id)
                    .header("webhook-timestamp", Long.toString(timestamp));
            if (!destination.secrets().isEmpty()) {
                request.header("webhook-signature", WebhookSigner.sign(destination.secrets(), id, timestamp,
                        job.body().body()));
            }
            job.body().headers().forEach(request::header);
            destination.headers().forEach(request::header);
            return request.build();
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
}
