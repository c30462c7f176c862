package io.walhook.delivery;

import java.util.LinkedHashSet;
import java.util.Set;
import java.util.function.Consumer;

/**
 * How many requests may be under way to one destination (scheme, host and port) at once, for all
 * subscriptions together: as many as the client keeps connections to it. A lane asks before it
 * starts a request; when the destination is at its limit the lane waits its turn, in the order
 * lanes asked, and its events stay in the lane, where they batch, instead of piling up in the
 * connection pool's queue (10,000 tenant lanes of one receiver had 40,000 requests queued there,
 * each with its timeout running).
 *
 * <p>A request that ends hands its place straight to the first lane waiting ({@code granted}
 * receives the gate), so a place is never free while a lane waits; a lane given a place it no
 * longer needs leaves it at once, which hands it on.
 */
public final class DestinationGate {

    private final int limit;
    private int inUse;
    private final Set<Consumer<DestinationGate>> waiting = new LinkedHashSet<>();

    DestinationGate(int limit) {
        if (limit < 1) {
            throw new IllegalArgumentException("a destination takes at least one request at a time, not " + limit);
        }
        this.limit = limit;
    }

    /**
     * A place for one request now, or false: then {@code granted} (the same object for a lane,
     * so a lane waits once) gets one as soon as a request ends, and must use or leave it.
     */
    synchronized boolean tryEnter(Consumer<DestinationGate> granted) {
        if (waiting.isEmpty() && inUse < limit) {
            inUse++;
            return true;
        }
        waiting.add(granted);
        return false;
    }

    /** A request ended, or a place granted is not needed: the first lane waiting gets it. */
    void leave() {
        Consumer<DestinationGate> next;
        synchronized (this) {
            var first = waiting.iterator();
            if (!first.hasNext()) {
                inUse--;
                return;
            }
            next = first.next();
            first.remove();
        }
        next.accept(this);
    }

    /** A lane that stops (its subscription deleted) waits no more. */
    synchronized void forget(Consumer<DestinationGate> granted) {
        waiting.remove(granted);
    }

    synchronized int inUse() {
        return inUse;
    }

    synchronized int waiting() {
        return waiting.size();
    }
}
