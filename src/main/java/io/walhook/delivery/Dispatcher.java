package io.walhook.delivery;

import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.jboss.logging.Logger;
import org.jboss.logging.MDC;

import io.walhook.change.ChangeEvent;
import io.walhook.checkpoint.AckTracker;
import io.walhook.delivery.Transport.Attempt;
import io.walhook.delivery.Transport.Outcome;
import io.walhook.pgoutput.Lsn;
import io.walhook.routing.Destination;
import io.walhook.routing.EventEncoder;
import io.walhook.routing.Subscription;

/**
 * Delivers each subscription's events over a few lanes per subscription that run concurrently: a
 * row's changes always take the same lane, so each row's changes arrive in commit order. Only the
 * {@link Transport} differs between destinations (HTTP webhooks, AMQP 1.0 addresses): an attempt
 * is delivered, retried with exponential backoff and full jitter (honouring {@code Retry-After}),
 * or gone (410 Gone disables the subscription: its requests are parked, none is sent, until a
 * replay through the API or a restart enables it again).
 *
 * <p>A request still failing after the retry window is parked in walhook's own table, and so is
 * every later request of that lane, in order, until the parked ones go through; so is one that
 * fails while its lane's buffer is full, since that buffer would otherwise hold the routing
 * thread, and with it every other subscription, until the window ends. The delivery
 * counts as done once parked, so the slot advances and other subscriptions never wait. Parked
 * requests are retried oldest first with a long backoff; a restart resumes them.
 */
public final class Dispatcher implements RoutingLoop.Sender, AutoCloseable {

    private static final Logger LOG = Logger.getLogger(Dispatcher.class);
    private static final Duration MIN_BACKOFF = Duration.ofMillis(200);
    private static final int LANE_CAPACITY = 1000;
    /** AMQP messages a lane has unsettled at once. */
    private static final int AMQP_WINDOW = 100;
    /** Jobs a parking lane writes to the parked table in one transaction. */
    private static final int PARK_CHUNK = 500;

    /** Timeouts and windows of every lane. */
    public record Settings(Duration requestTimeout, Duration maxBackoff, Duration retryWindow,
            Duration parkedRetryInterval, int concurrency) {
        public Settings {
            if (concurrency < 1) {
                throw new IllegalArgumentException("concurrency must be at least 1, not " + concurrency);
            }
        }
    }

    /** What one subscription's lanes are doing, for /status and metrics; {@code retrying}: how many lanes retry now. */
    public record LaneStatus(String subscription, long inFlight, long retrying, boolean parking, long parked,
            long delivered, String lastError, boolean disabled) {
    }

    /**
     * Why a lane stopped retrying a request in memory ({@code after}, for the log), the attempts it
     * made, and how soon to try again from the parked table.
     */
    private record GaveUp(String after, int attempts, Duration retryIn) {
    }

    /** One event's copy for one subscription; {@code address} is the AMQP address it resolved to (null for webhooks). */
    private record Job(String eventId, Lsn commitLsn, Instant commitTime, byte[] body, String contentType,
            Map<String, String> headers, String address, Runnable done) {
    }

    private static List<Runnable> completions(List<Job> jobs) {
        List<Runnable> done = new ArrayList<>(jobs.size());
        for (Job job : jobs) {
            done.add(job.done());
        }
        return done;
    }

    /** What goes over the wire: one job's request, or a batch's JSON array of their bodies. */
    public record Request(String id, byte[] body, String contentType, Map<String, String> headers, String address) {

        static Request of(Job job) {
            return new Request(job.eventId(), job.body(), job.contentType(), job.headers(), job.address());
        }

        /**
         * What a subscription sends for these jobs: a webhook that batches, always one JSON array of
         * their bodies (CloudEvents batched mode for structured CloudEvents), even of one, so a
         * receiver sees one shape; otherwise the one job's own request; AMQP, a message per job.
         */
        static List<Request> of(Subscription subscription, List<Job> jobs) {
            if (subscription.destination() instanceof Destination.Amqp) {
                // one message each, sent back to back and settled together
                return jobs.stream().map(Request::of).toList();
            }
            if (batchSize(subscription) == 1) {
                return List.of(of(jobs.get(0)));
            }
            List<byte[]> bodies = new ArrayList<>(jobs.size());
            for (Job job : jobs) {
                bodies.add(job.body());
            }
            return List.of(batch(jobs.get(0).eventId(), jobs.get(0).contentType(), bodies));
        }

        /**
         * A JSON array of these bodies. Its id names the first event and the count: a lane's batches
         * are runs of its events in commit order, so the same run always has the same id.
         */
        static Request batch(String firstId, String contentType, List<byte[]> bodies) {
            int length = 1 + bodies.size();
            for (byte[] part : bodies) {
                length += part.length;
            }
            byte[] body = new byte[length];
            int at = 0;
            body[at++] = '[';
            for (int i = 0; i < bodies.size(); i++) {
                if (i > 0) {
                    body[at++] = ',';
                }
                byte[] part = bodies.get(i);
                System.arraycopy(part, 0, body, at, part.length);
                at += part.length;
            }
            body[at] = ']';
            String type = contentType.equals(EventEncoder.CLOUDEVENTS_JSON)
                    ? "application/cloudevents-batch+json" : EventEncoder.JSON;
            return new Request(firstId + "+" + bodies.size(), body, type, Map.of(), null);
        }
    }

    private final Clock clock;
    private final Settings settings;
    private final ParkedEventStore parkedEvents;
    private final DeliveryMetrics metrics;
    private final java.util.function.Predicate<String> paused;
    private final java.util.function.Function<Subscription, Transport> transports;
    /** Each subscription's lanes by index, started on first use. */
    private final Map<String, AtomicReferenceArray<Lane>> lanes = new ConcurrentHashMap<>();
    private final Set<String> disabled = ConcurrentHashMap.newKeySet();

    /**
     * @param paused whether a subscription is paused: its requests are parked, not sent, until it resumes
     * @param transports the transport for a subscription's destination, asked once per lane
     */
    public Dispatcher(Clock clock, Settings settings, ParkedEventStore parkedEvents, DeliveryMetrics metrics,
            java.util.function.Predicate<String> paused, java.util.function.Function<Subscription, Transport> transports) {
        this.paused = paused;
        this.transports = transports;
        this.clock = clock;
        this.settings = settings;
        this.parkedEvents = parkedEvents;
        this.metrics = metrics;
    }

    /** Starts the lanes of subscriptions that have parked requests, so those are retried even without new events. */
    public void resumeParked(Collection<Subscription> subscriptions) throws SQLException {
        Set<String> parked = parkedEvents.subscriptionsWithParkedEvents();
        for (Subscription subscription : subscriptions) {
            if (parked.contains(subscription.name())) {
                for (int lane = 0; lane < settings.concurrency(); lane++) {
                    lane(subscription, lane);
                }
            }
        }
    }

    @Override
    public void send(Subscription subscription, ChangeEvent event, EventEncoder.Encoded body, Runnable done)
            throws InterruptedException {
        String address = subscription.destination() instanceof Destination.Amqp amqp ? amqp.address(event) : null;
        lane(subscription, Math.floorMod(event.rowKeyHash(), settings.concurrency())).queue.put(new Job(event.id(),
                event.tx().commitLsn(), event.tx().commitTime(), body.body(), body.contentType(), body.headers(), address,
                done));
    }

    /** Changes to one row always take the same lane of their subscription, so they arrive in commit order. */
    private Lane lane(Subscription subscription, int index) {
        AtomicReferenceArray<Lane> ofSubscription = lanes.computeIfAbsent(subscription.name(),
                name -> new AtomicReferenceArray<>(settings.concurrency()));
        Lane lane = ofSubscription.get(index);
        if (lane == null) {
            synchronized (ofSubscription) {
                lane = ofSubscription.get(index);
                if (lane == null) {
                    lane = new Lane(subscription, index); // starts its thread: made once
                    ofSubscription.set(index, lane);
                }
            }
        }
        lane.follow(subscription);
        return lane;
    }

    /** Every lane started so far. */
    private List<Lane> allLanes() {
        List<Lane> all = new java.util.ArrayList<>();
        for (AtomicReferenceArray<Lane> ofSubscription : lanes.values()) {
            for (int i = 0; i < ofSubscription.length(); i++) {
                Lane lane = ofSubscription.get(i);
                if (lane != null) {
                    all.add(lane);
                }
            }
        }
        return all;
    }

    /**
     * Retries this subscription's parked requests now rather than at their next backoff (the API's
     * replay); starts its lanes when none runs. A subscription a 410 disabled is enabled again.
     */
    public void retryParkedNow(Subscription subscription) {
        if (disabled.remove(subscription.name())) {
            LOG.infof("subscription %s enabled again: retrying its parked events", subscription.name());
        }
        for (int lane = 0; lane < settings.concurrency(); lane++) {
            Lane l = lane(subscription, lane);
            l.nextParkedAttempt = Instant.MIN;
            l.parkedBackoffMillis = MIN_BACKOFF.toMillis();
            l.parking = true;
        }
    }

    /** Whether a 410 disabled the subscription. */
    public boolean isDisabled(String subscription) {
        return disabled.contains(subscription);
    }

    /** Per subscription, its lanes added up. */
    public List<LaneStatus> status() {
        Map<String, LaneStatus> bySubscription = new java.util.TreeMap<>();
        for (Lane lane : allLanes()) {
            bySubscription.merge(lane.subscription.name(), lane.status(), (a, b) -> new LaneStatus(a.subscription(),
                    a.inFlight() + b.inFlight(), a.retrying() + b.retrying(), a.parking() || b.parking(),
                    a.parked() + b.parked(), a.delivered() + b.delivered(),
                    a.lastError() != null ? a.lastError() : b.lastError(), a.disabled()));
        }
        return List.copyOf(bySubscription.values());
    }

    @Override
    public void close() {
        allLanes().forEach(lane -> lane.thread.interrupt());
    }

    /**
     * How many queued events a lane takes at once: a webhook's batch (one JSON array); for AMQP,
     * the messages it sends back to back before waiting for their settlements.
     */
    private static int batchSize(Subscription subscription) {
        return subscription.destination() instanceof Destination.Webhook ? subscription.batchMaxEvents() : AMQP_WINDOW;
    }

    /** One subscription's queue and the thread that delivers it in order. */
    private final class Lane implements Runnable {
        volatile Subscription subscription;
        final int index;
        volatile Transport transport;
        final HandOffQueue<Job> queue = new HandOffQueue<>(LANE_CAPACITY);
        final Thread thread;
        final AtomicLong delivered = new AtomicLong();
        final AtomicLong parked = new AtomicLong();
        volatile boolean parking;
        volatile boolean retrying;
        volatile String lastError;
        volatile long parkedBackoffMillis = MIN_BACKOFF.toMillis();
        volatile Instant nextParkedAttempt = Instant.MIN;

        Lane(Subscription subscription, int index) {
            this.subscription = subscription;
            this.index = index;
            this.transport = transports.apply(subscription);
            this.thread = new Thread(this, "walhook-webhook-" + subscription.name() + "-" + index);
            thread.setDaemon(true);
            thread.start();
        }

        /**
         * A subscription replaced through the API (destination, batching, retry policy) applies to
         * the requests its lanes send from now on.
         */
        void follow(Subscription latest) {
            if (latest != subscription) {
                transport = transports.apply(latest);
                subscription = latest;
            }
        }

        LaneStatus status() {
            return new LaneStatus(subscription.name(), queue.size(), retrying ? 1 : 0, parking, parked.get(), delivered.get(),
                    lastError, disabled.contains(subscription.name()));
        }

        @Override
        public void run() {
            // every log line of this lane names its subscription and lane (JSON logs: the "mdc" object)
            MDC.put("subscription", subscription.name());
            MDC.put("lane", Integer.toString(index));
            try {
                long alreadyParked = untilDone(() -> parkedEvents.count(subscription.name(), index,
                        settings.concurrency()));
                parked.set(alreadyParked);
                parking = alreadyParked > 0;
                while (!Thread.currentThread().isInterrupted()) {
                    if (!parking) {
                        List<Job> batch = nextBatch();
                        if (paused.test(subscription.name()) || disabled.contains(subscription.name())) {
                            park(batch, 0);
                            parking = true;
                            AckTracker.completeAll(completions(batch));
                            continue;
                        }
                        GaveUp gaveUp = deliverWithinWindow(Request.of(subscription, batch));
                        if (gaveUp != null) {
                            park(batch, gaveUp.attempts());
                            metrics.parked(subscription.name(), batch.size());
                            parking = true;
                            nextParkedAttempt = clock.instant().plus(gaveUp.retryIn());
                            LOG.warnf("subscription %s: %s still failing after %s (%s); parking its events until it"
                                    + " takes them again", subscription.name(), transport, gaveUp.after(), lastError);
                        } else {
                            delivered.addAndGet(batch.size());
                            Instant committed = batch.get(0).commitTime();
                            metrics.delivered(subscription.name(), batch.size(),
                                    committed == null ? Duration.ZERO : Duration.between(committed, clock.instant()));
                        }
                        AckTracker.completeAll(completions(batch));
                        continue;
                    }
                    // paused, or disabled by a 410: new events are parked behind the others, none is sent
                    boolean held = paused.test(subscription.name()) || disabled.contains(subscription.name());
                    if (held) {
                        nextParkedAttempt = Instant.MIN; // resuming retries at once
                    }
                    Instant now = clock.instant();
                    long untilRetry = nextParkedAttempt.isAfter(now) ? Duration.between(now, nextParkedAttempt).toMillis() : 0;
                    if (held || untilRetry > 0) {
                        // wake at least every second: a pause, resume or replay takes effect promptly
                        Job job = queue.poll(Math.max(1, Math.min(untilRetry, 1000)), TimeUnit.MILLISECONDS);
                        if (job != null) {
                            // behind the parked ones, in order; what queued meanwhile goes in the same transaction
                            List<Job> jobs = new ArrayList<>();
                            jobs.add(job);
                            queue.drainTo(jobs, PARK_CHUNK - 1);
                            park(jobs, 0);
                            metrics.parked(subscription.name(), jobs.size());
                            AckTracker.completeAll(completions(jobs));
                        }
                        continue;
                    }
                    retryParked();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        /** The next job, and as many following ones as the subscription batches, waiting at most its batch wait. */
        private List<Job> nextBatch() throws InterruptedException {
            Job first = queue.take();
            int max = batchSize(subscription);
            if (max == 1) {
                return List.of(first);
            }
            List<Job> batch = new java.util.ArrayList<>(Math.min(max, LANE_CAPACITY));
            batch.add(first);
            // asleep until the batch can be full or its wait is over: not woken by every event
            queue.drainWhenAtLeast(batch, max - 1, max - 1,
                    System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(subscription.batchMaxWaitMs()));
            return batch;
        }

        /**
         * Tries until delivered; null then, else why it gave up: the retry window or the subscription's
         * attempts ran out, a 410 disabled the subscription, or its lane filled up behind the request.
         */
        private GaveUp deliverWithinWindow(List<Request> requests) throws InterruptedException {
            try {
                return retryInMemory(requests);
            } finally {
                retrying = false;
            }
        }

        private GaveUp retryInMemory(List<Request> requests) throws InterruptedException {
            Request job = requests.get(0);
            MDC.remove("event");
            MDC.remove("attempt");
            Duration window = subscription.retry().window().orElse(settings.retryWindow());
            long maxBackoff = subscription.retry().maxBackoff().orElse(settings.maxBackoff()).toMillis();
            int maxAttempts = subscription.retry().maxAttempts().orElse(Integer.MAX_VALUE);
            Instant giveUp = clock.instant().plus(window);
            long backoff = Math.min(MIN_BACKOFF.toMillis(), maxBackoff);
            for (int attempt = 1; ; attempt++) {
                if (disabled.contains(subscription.name())) {
                    return new GaveUp("a 410 Gone disabled the subscription", attempt - 1, settings.parkedRetryInterval());
                }
                Attempt result = attempt(requests);
                if (result.outcome() == Outcome.GONE) {
                    return new GaveUp("its destination answered 410 Gone, which disabled the subscription", attempt,
                            settings.parkedRetryInterval());
                }
                if (result.outcome() != Outcome.RETRY) {
                    return null;
                }
                retrying = true;
                lastError = result.problem();
                metrics.retried(subscription.name());
                // Retry-After is honoured (bounded); otherwise exponential backoff with full jitter
                long wait = result.retryAfter().isPresent()
                        ? Math.min(result.retryAfter().get().toMillis(), maxBackoff * 10)
                        : Math.max(ThreadLocalRandom.current().nextLong(0, backoff + 1), 50);
                if (attempt >= maxAttempts || clock.instant().plusMillis(wait).isAfter(giveUp)) {
                    return new GaveUp(attempt >= maxAttempts ? attempt + " attempts" : "its retry window of " + window,
                            attempt, settings.parkedRetryInterval());
                }
                MDC.put("event", job.id());
                MDC.put("attempt", Integer.toString(attempt));
                LOG.warnf("subscription %s: %s attempt %d to %s failed (%s); retrying in %d ms", subscription.name(),
                        job.id(), attempt, transport, result.problem(), wait);
                // a full lane would block the routing thread, and with it every other subscription:
                // park now rather than hold them back for the rest of the window
                long waitStart = System.nanoTime();
                if (queue.awaitFull(waitStart + TimeUnit.MILLISECONDS.toNanos(wait))) {
                    // the parked requests keep this backoff's schedule, not the parked retry interval's
                    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - waitStart);
                    parkedBackoffMillis = Math.min(Math.max(backoff * 2, MIN_BACKOFF.toMillis()),
                            settings.parkedRetryInterval().toMillis());
                    return new GaveUp(attempt + " attempts, with " + LANE_CAPACITY + " more events waiting behind them",
                            attempt, Duration.ofMillis(Math.max(wait - waited, 0)));
                }
                backoff = Math.min(backoff * 2, maxBackoff);
            }
        }

        /** Parks these jobs in their order, in one transaction, after {@code attempts} at them. */
        private void park(List<Job> jobs, int attempts) throws InterruptedException {
            List<ParkedEventStore.Entry> entries = new ArrayList<>(jobs.size());
            for (Job job : jobs) {
                entries.add(new ParkedEventStore.Entry(job.eventId(), job.commitLsn(), job.contentType(), job.headers(),
                        job.address(), job.body()));
            }
            String error = lastError;
            untilDone(() -> {
                parkedEvents.park(subscription.name(), index, entries, attempts, error);
                return null;
            });
            parked.addAndGet(jobs.size());
        }

        /** Oldest first; stops at the first failure and backs off, up to the parked retry interval. */
        private void retryParked() throws InterruptedException {
            while (true) {
                List<ParkedEventStore.Parked> batch = untilDone(() -> parkedEvents.oldest(subscription.name(), index,
                        settings.concurrency(), 100));
                if (batch.isEmpty()) {
                    parking = false;
                    parked.set(0);
                    parkedBackoffMillis = MIN_BACKOFF.toMillis();
                    if (untilDone(() -> parkedEvents.count(subscription.name(), index, settings.concurrency())) == 0) {
                        LOG.infof("subscription %s lane %d: every parked event delivered; delivering directly again",
                                subscription.name(), index);
                    }
                    return;
                }
                int size = batchSize(subscription);
                for (int from = 0; from < batch.size(); from += size) {
                    List<ParkedEventStore.Parked> run = batch.subList(from, Math.min(from + size, batch.size()));
                    ParkedEventStore.Parked first = run.get(0);
                    Attempt result = attempt(size == 1 || subscription.destination() instanceof Destination.Amqp
                            ? run.stream().map(p -> new Request(p.eventId(), p.body(), p.contentType(), p.headers(),
                                    p.address())).toList()
                            : List.of(Request.batch(first.eventId(), first.contentType(),
                                    run.stream().map(ParkedEventStore.Parked::body).toList())));
                    if (result.outcome() == Outcome.RETRY) {
                        lastError = result.problem();
                        List<Long> ids = run.stream().map(ParkedEventStore.Parked::id).toList();
                        untilDone(() -> {
                            parkedEvents.failed(ids, result.problem());
                            return null;
                        });
                        long wait = result.retryAfter().map(Duration::toMillis).orElse(parkedBackoffMillis);
                        parkedBackoffMillis = Math.min(parkedBackoffMillis * 2, settings.parkedRetryInterval().toMillis());
                        nextParkedAttempt = clock.instant().plusMillis(Math.max(wait, MIN_BACKOFF.toMillis()));
                        return;
                    }
                    if (result.outcome() == Outcome.GONE) {
                        return; // disabled: they stay parked until the subscription is enabled again
                    }
                    List<Long> ids = run.stream().map(ParkedEventStore.Parked::id).toList();
                    untilDone(() -> {
                        parkedEvents.delivered(ids);
                        return null;
                    });
                    parked.addAndGet(-run.size());
                    delivered.addAndGet(run.size());
                    metrics.delivered(subscription.name(), run.size(), Duration.ZERO);
                }
            }
        }

        private Attempt attempt(List<Request> requests) throws InterruptedException {
            Request request = requests.get(0);
            Attempt result = requests.size() == 1 ? transport.attempt(request) : transport.attemptAll(requests);
            if (result.outcome() == Outcome.GONE) {
                disabled.add(subscription.name());
                lastError = result.problem();
                LOG.errorf("subscription %s disabled: %s answered %s to %s", subscription.name(), transport,
                        result.problem(), request.id());
            }
            return result;
        }

        /** State-table work that must not be skipped: retried until the database answers. */
        private <T> T untilDone(SqlCall<T> call) throws InterruptedException {
            long wait = 500;
            while (true) {
                try {
                    return call.run();
                } catch (SQLException e) {
                    lastError = "state database: " + e.getMessage();
                    LOG.warnf("subscription %s: cannot reach parked events (%s); retrying in %d ms", subscription.name(),
                            e.getMessage(), wait);
                    Thread.sleep(wait);
                    wait = Math.min(wait * 2, 30_000);
                }
            }
        }
    }

    private interface SqlCall<T> {
        T run() throws SQLException;
    }
}
