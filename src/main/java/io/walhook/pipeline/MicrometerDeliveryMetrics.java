package io.walhook.pipeline;

import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.walhook.delivery.DeliveryMetrics;
import io.walhook.routing.Subscription;

/**
 * Delivery metrics per subscription, tagged with its id and name: walhook_delivery_routed_total,
 * _events_total, _retries_total, _parked_total, _latency.
 */
final class MicrometerDeliveryMetrics implements DeliveryMetrics {
    private final MeterRegistry registry;
    /** Meters by subscription id, looked up once (routing counts every event); made again after a rename. */
    private final Map<String, Meters> meters = new ConcurrentHashMap<>();

    /**
     * The latency histogram's buckets: thirteen, not the seventy of a percentile histogram, since
     * every subscription has one (10,000 tenant subscriptions held tens of MB of buckets).
     */
    private static final Duration[] LATENCY_BUCKETS = Stream.of(5, 10, 25, 50, 100, 250, 500, 1000,
            2500, 5000, 10_000, 30_000, 60_000).map(Duration::ofMillis).toArray(Duration[]::new);

    /**
     * A subscription's meters: its counters made with them, when it comes into force (made by the
     * routing thread at a subscription's first event, 10,000 tenants' meters took a third of it
     * during a drain; and a counter that appears with its first increment loses that increment to
     * Prometheus's {@code increase()}); its latency histogram, the largest, at its first sample, by
     * the thread that records it (made for every subscription in force, all five meters doubled an
     * idle tenant's memory). The registry gives back the meter it has for the same name and tags,
     * so two threads making one get the same.
     */
    private final class Meters {
        private final String id;
        private final String name;
        private final Tags tags;
        private final Counter routed;
        private final Counter delivered;
        private final Counter retried;
        private final Counter parked;
        private volatile Timer latency;

        Meters(Subscription subscription) {
            this.id = subscription.id();
            this.name = subscription.name();
            this.tags = Tags.of("subscription", subscription.name(), "subscription_id", subscription.id());
            this.routed = registry.counter("walhook.delivery.routed", tags);
            this.delivered = registry.counter("walhook.delivery.events", tags);
            this.retried = registry.counter("walhook.delivery.retries", tags);
            this.parked = registry.counter("walhook.delivery.parked", tags);
        }

        /**
         * The same subscription's meters under its new name: its counters go on from the old ones'
         * counts, whose series leave the scrape (a rename keeps a subscription's counters; begun at
         * zero beside the old ones, a dashboard by name lost what was counted). Its latency histogram
         * begins anew.
         */
        Meters renamed(Subscription subscription) {
            Meters now = new Meters(subscription);
            now.routed.increment(routed.count());
            now.delivered.increment(delivered.count());
            now.retried.increment(retried.count());
            now.parked.increment(parked.count());
            registry.remove(routed);
            registry.remove(delivered);
            registry.remove(retried);
            registry.remove(parked);
            Timer t = latency;
            if (t != null) {
                registry.remove(t);
            }
            return now;
        }

        Timer latency() {
            Timer t = latency;
            if (t == null) {
                t = latency = Timer.builder("walhook.delivery.latency")
                        .description("from commit to the destination's 2xx, for events delivered straight from memory")
                        .tags(tags).serviceLevelObjectives(LATENCY_BUCKETS).register(registry);
                if (meters.get(id) != this) {
                    registry.remove(t); // its subscription went meanwhile ({@link #onlyInForce}), or was renamed
                }
            }
            return t;
        }
    }

    MicrometerDeliveryMetrics(MeterRegistry registry) {
        this.registry = registry;
    }

    /**
     * The subscription's meters, under the name they have: a thread counting with an older or newer
     * object of it (a lane not yet synced, routing with an older router) counts there too. Renamed
     * only by {@link #inForce}: renamed by whichever thread met a name last, the series went back
     * and forth between the two names.
     */
    private Meters of(Subscription subscription) {
        Meters m = meters.get(subscription.id());
        return m != null ? m : meters.computeIfAbsent(subscription.id(), id -> new Meters(subscription));
    }

    /** Made when it comes into force; renamed, its counters go on under its new name ({@link Meters#renamed}). */
    @Override
    public void inForce(Subscription subscription) {
        Meters m = meters.get(subscription.id());
        if (m == null || !m.name.equals(subscription.name())) {
            meters.compute(subscription.id(), (id, had) -> had == null ? new Meters(subscription)
                    : had.name.equals(subscription.name()) ? had : had.renamed(subscription));
        }
    }

    /**
     * Removes the meters of subscriptions no longer in force, under every name they had. Looking
     * through the registry only when one went: a change of the subscriptions in force with 10,000
     * tenants costs a walk of their ids.
     */
    @Override
    public void onlyInForce(Set<String> ids) {
        if (!meters.keySet().removeIf(id -> !ids.contains(id))) {
            return;
        }
        for (Meter meter : registry.getMeters()) {
            String id = meter.getId().getTag("subscription_id");
            if (id != null && meter.getId().getName().startsWith("walhook.delivery.") && !ids.contains(id)) {
                registry.remove(meter);
            }
        }
    }

    @Override
    public void delivered(Subscription subscription, int events, Duration sinceCommit) {
        Meters m = of(subscription);
        m.delivered.increment(events);
        if (!sinceCommit.isZero()) {
            m.latency().record(sinceCommit);
        }
    }

    @Override
    public void routed(Subscription subscription, int events) {
        of(subscription).routed.increment(events);
    }

    @Override
    public void retried(Subscription subscription) {
        of(subscription).retried.increment();
    }

    @Override
    public void parked(Subscription subscription, int events) {
        of(subscription).parked.increment(events);
    }
}
