package io.walhook.delivery;

import java.time.Duration;
import java.util.Set;

import io.walhook.routing.Subscription;

/** What delivery reports as it goes, per subscription (its id and name); the application binds it to Micrometer. */
public interface DeliveryMetrics {

    DeliveryMetrics NONE = new DeliveryMetrics() {
    };

    /**
     * The subscription is in force: its counters exist from now, at zero, before its first event (a
     * counter that appears with its first increment loses that increment to Prometheus's {@code
     * rate()}, and making 10,000 tenants' meters one by one slowed the routing of their first
     * events). Called again for the same subscription, it does nothing.
     */
    default void inForce(Subscription subscription) {
    }

    /**
     * These are all the subscriptions in force, by id: the meters of any other (deleted) go, its
     * series with them, so that tenants coming and going do not grow the registry and the scrape.
     */
    default void onlyInForce(Set<String> ids) {
    }

    /** {@code events} were routed to the subscription and handed to its sender (events in). */
    default void routed(Subscription subscription, int events) {
    }

    /** {@code events} reached the destination; {@code sinceCommit}: from the oldest one's commit to the 2xx (zero: unknown). */
    default void delivered(Subscription subscription, int events, Duration sinceCommit) {
    }

    /** An attempt failed and will be retried. */
    default void retried(Subscription subscription) {
    }

    /** {@code events} went to the durable queue. */
    default void parked(Subscription subscription, int events) {
    }
}
