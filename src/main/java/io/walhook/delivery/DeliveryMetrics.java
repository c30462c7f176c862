package io.walhook.delivery;

import java.time.Duration;

/** What delivery reports as it goes; the application binds it to Micrometer. */
public interface DeliveryMetrics {

    DeliveryMetrics NONE = new DeliveryMetrics() {
    };

    /** {@code events} were routed to the subscription and handed to its sender (events in). */
    default void routed(String subscription, int events) {
    }

    /** {@code events} reached the destination; {@code sinceCommit}: from the oldest one's commit to the 2xx. */
    default void delivered(String subscription, int events, Duration sinceCommit) {
    }

    /** An attempt failed and will be retried. */
    default void retried(String subscription) {
    }

    /** {@code events} were parked. */
    default void parked(String subscription, int events) {
    }
}
