package io.walhook.delivery;

import java.time.Duration;
import java.util.Optional;

/**
 * Carries one request to one subscription's destination and says how it ended. The dispatcher
 * owns ordering, batching, retries and parking; a transport only makes the attempt.
 */
public interface Transport {

    /** How an attempt ended, decided once. */
    enum Outcome { DELIVERED, RETRY, GONE }

    /** The outcome, how long the destination asked us to wait, and what went wrong (for logs and /status). */
    record Attempt(Outcome outcome, Optional<Duration> retryAfter, String problem) {

        public static Attempt retry(String problem) {
            return new Attempt(Outcome.RETRY, Optional.empty(), problem);
        }
    }

    /** Sends the request once and waits for its outcome. */
    Attempt attempt(Dispatcher.Request request) throws InterruptedException;

    /**
     * Sends these requests of one lane, in order, and waits for them all: delivered when every one
     * is, else the first failure (the dispatcher then sends them all again, ids unchanged). One
     * after the other unless the transport can have several in flight.
     */
    default Attempt attemptAll(java.util.List<Dispatcher.Request> requests) throws InterruptedException {
        Attempt last = null;
        for (Dispatcher.Request request : requests) {
            last = attempt(request);
            if (last.outcome() != Outcome.DELIVERED) {
                return last;
            }
        }
        return last;
    }
}
