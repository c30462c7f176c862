package io.walhook.delivery;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.jboss.logging.Logger;

import io.walhook.change.ChangeEvent;
import io.walhook.checkpoint.AckTracker;
import io.walhook.checkpoint.HandOffQueue;
import io.walhook.pgoutput.Lsn;
import io.walhook.routing.EventEncoder;
import io.walhook.routing.EventFormat;
import io.walhook.routing.Projection;
import io.walhook.routing.Router;
import io.walhook.routing.Subscription;
import io.walhook.routing.SubscriptionRegistry;
import io.walhook.checkpoint.PendingEvent;

/**
 * Takes events from the reader in commit order, routes each to the subscriptions that want it,
 * writes it once per (format, projection) those subscriptions need, and hands every copy to the
 * sender. The transaction's outstanding count grows by the copies and shrinks as the sender
 * reports each delivered: an event no one wants is complete at once. The router is taken afresh
 * at each transaction, so subscription changes apply between transactions.
 */
public final class RoutingLoop implements Runnable {

    private static final Logger LOG = Logger.getLogger(RoutingLoop.class);
    /** Events taken from the reader at once. */
    private static final int CHUNK = 256;

    /**
     * Delivers copies of events: {@code done} runs once each is delivered (or durably queued). A
     * chunk's copies are handed on at its end, in {@link #flush}, which may wait while a subscription
     * holds its whole memory budget.
     */
    public interface Sender {
        void send(Subscription subscription, ChangeEvent event, EventEncoder.Encoded body, Runnable done)
                throws InterruptedException;

        default void flush() throws InterruptedException {
        }
    }

    /**
     * Backfills' side of the stream: sees every event, in order, on the routing thread, before it is
     * routed, and may send rows of its own there through {@link Reads}.
     */
    public interface Snapshots {
        Snapshots NONE = (event, reads) -> false;

        /** True when the event is walhook's own (a backfill's watermark): it is then not routed. */
        boolean observe(ChangeEvent event, Reads reads) throws InterruptedException;
    }

    /** How a backfill's {@code read} events join the stream: to a subscription in force, on its rows' lanes. */
    public interface Reads {
        /** The subscription with this id as the current transaction routes to it; null when none is in force. */
        Subscription subscription(String id);

        /** Writes the event as the subscription wants it and hands it to its sender; {@code done} as for {@link Sender#send}. */
        void send(Subscription subscription, ChangeEvent event, Runnable done) throws InterruptedException;

        /**
         * Holds the acknowledgement of the event being observed (its transaction's position) until
         * the returned {@code Runnable} runs, once: for what must be made durable first.
         */
        Runnable hold();
    }

    private record Shape(EventFormat format, Projection projection) {
    }

    /** The event's JSON, written on first use and then shared by every format that needs it unprojected. */
    private final class EventJson implements java.util.function.Supplier<byte[]> {
        private final ChangeEvent event;
        private byte[] bytes;

        EventJson(ChangeEvent event) {
            this.event = event;
        }

        @Override
        public byte[] get() {
            if (bytes == null) {
                bytes = encoder.json(event);
            }
            return bytes;
        }
    }

    private final HandOffQueue<PendingEvent> events;
    private final AckTracker tracker;
    private final SubscriptionRegistry registry;
    private final EventEncoder encoder;
    private final Sender sender;
    private final DeliveryMetrics metrics;
    private final Snapshots snapshots;
    private final Reads reads = new Reads() {
        @Override
        public Subscription subscription(String id) {
            for (Subscription s : router.subscriptions()) {
                if (s.id().equals(id)) {
                    return currentOf == null ? s : currentOf.get(s); // as it is now: its lane's, not a copy
                }
            }
            return null;
        }

        @Override
        public void send(Subscription subscription, ChangeEvent event, Runnable done) throws InterruptedException {
            sender.send(subscription, event, encoder.encode(event, subscription.format(), subscription.projection(), null),
                    done);
            routedInChunk.computeIfAbsent(subscription, s -> new int[1])[0]++;
        }

        @Override
        public Runnable hold() {
            tracker.add(observing, 1); // the event's own share is still outstanding: its transaction is not complete
            return new AckTracker.Completion(tracker, observing);
        }
    };
    /** The transaction of the event {@link #snapshots} observes. */
    private AckTracker.Ticket observing;
    /** The routing thread's own: the router of the current transaction, and each shape written for one event. */
    private Router router;
    /** What each subscription {@link #router} returns stands for now, when it routes as subscriptions matched before an edit. */
    private Map<Subscription, Subscription> currentOf;
    /** Subscriptions (ids) created after the transaction being routed committed: it is not theirs. */
    private Set<String> unborn = Set.of();
    private Lsn transaction;
    private final Map<Shape, EventEncoder.Encoded> written = new HashMap<>();
    /** Copies handed to each subscription's sender in the current chunk: reported once per chunk, not per copy. */
    private final Map<Subscription, int[]> routedInChunk = new java.util.IdentityHashMap<>();

    public RoutingLoop(HandOffQueue<PendingEvent> events, AckTracker tracker, SubscriptionRegistry registry,
            EventEncoder encoder, Sender sender) {
        this(events, tracker, registry, encoder, sender, DeliveryMetrics.NONE);
    }

    /** {@code metrics} counts the copies handed to each subscription's sender, once per chunk ({@link DeliveryMetrics#routed}). */
    public RoutingLoop(HandOffQueue<PendingEvent> events, AckTracker tracker, SubscriptionRegistry registry,
            EventEncoder encoder, Sender sender, DeliveryMetrics metrics) {
        this(events, tracker, registry, encoder, sender, metrics, Snapshots.NONE);
    }

    /** {@code snapshots} sees every event first (backfills' watermarks). */
    public RoutingLoop(HandOffQueue<PendingEvent> events, AckTracker tracker, SubscriptionRegistry registry,
            EventEncoder encoder, Sender sender, DeliveryMetrics metrics, Snapshots snapshots) {
        this.snapshots = snapshots;
        this.events = events;
        this.tracker = tracker;
        this.registry = registry;
        this.encoder = encoder;
        this.sender = sender;
        this.metrics = metrics;
    }

    @Override
    public void run() {
        router = registry.router();
        List<PendingEvent> chunk = new ArrayList<>(CHUNK);
        try {
            while (!Thread.currentThread().isInterrupted()) {
                chunk.clear();
                chunk.add(events.take());
                events.drainTo(chunk, CHUNK - 1);
                try {
                    for (PendingEvent pending : chunk) {
                        route(pending);
                    }
                } finally {
                    reportRouted();
                }
                sender.flush();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            LOG.errorf(e, "routing stopped: %s; nothing past the last delivered event will be acknowledged", e.getMessage());
            throw e;
        }
    }

    private void route(PendingEvent pending) throws InterruptedException {
        ChangeEvent event = pending.event();
        if (!event.tx().commitLsn().equals(transaction)) {
            // the subscriptions as they matched when the transaction committed
            SubscriptionRegistry.Routing routing = registry.routing(event.tx().commitLsn());
            router = routing.router();
            currentOf = routing.current();
            unborn = routing.unborn();
            transaction = event.tx().commitLsn();
        }
        AckTracker.Ticket ticket = pending.ticket();
        observing = ticket;
        if (snapshots.observe(event, reads)) {
            tracker.complete(ticket, 1); // a watermark: walhook's own, never routed
            return;
        }
        // filters read the rows from the tuples, not from the JSON: it is written only when delivered
        List<Subscription> matched = router.route(event);
        if (currentOf != null && !matched.isEmpty()) {
            List<Subscription> now = new ArrayList<>(matched.size());
            matched.forEach(subscription -> now.add(currentOf.get(subscription)));
            matched = now;
        }
        if (!unborn.isEmpty() && !matched.isEmpty()) {
            List<Subscription> born = new ArrayList<>(matched.size());
            matched.forEach(subscription -> {
                if (!unborn.contains(subscription.id())) {
                    born.add(subscription);
                }
            });
            matched = born;
        }
        if (matched.isEmpty()) {
            tracker.complete(ticket, 1); // the reader's share: no one wants it, it is done
            return;
        }
        if (matched.size() > 1) {
            tracker.add(ticket, matched.size() - 1); // the reader's share becomes the first copy's
        }
        EventJson json = new EventJson(event);
        written.clear();
        for (Subscription subscription : matched) {
            EventEncoder.Encoded body = matched.size() == 1
                    ? encoder.encode(event, subscription.format(), subscription.projection(), json)
                    : written.computeIfAbsent(new Shape(subscription.format(), subscription.projection()),
                            shape -> encoder.encode(event, shape.format(), shape.projection(), json));
            sender.send(subscription, event, body, new AckTracker.Completion(tracker, ticket));
            routedInChunk.computeIfAbsent(subscription, s -> new int[1])[0]++;
        }
    }

    private void reportRouted() {
        routedInChunk.forEach((subscription, count) -> {
            if (count[0] > 0) {
                metrics.routed(subscription, count[0]);
                count[0] = 0;
            }
        });
        if (routedInChunk.size() > 1024) {
            routedInChunk.clear(); // subscriptions came and went by the thousand: keep only the current ones
        }
    }
}
