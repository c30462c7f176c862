package io.walhook.delivery;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The memory every lane's undelivered events take together, and routing's wait while it is
 * spent. A lane's own budget bounds one subscription; with thousands of them, each far under its
 * own budget, this one bounds the whole: a backlog drained into 10,000 tenant subscriptions no
 * longer lands in the heap at once.
 *
 * <p>Lanes add what routing hands them and release what they deliver or durably queue. Counted
 * roughly, as the lanes count ({@link Job#memoryBytes()}). A single chunk may take it past its
 * limit; routing waits after that chunk until it is back under.
 */
final class MemoryBudget {

    private final long limit;
    private final AtomicLong used = new AtomicLong();
    /** Lanes holding some of it now. */
    private final java.util.concurrent.atomic.AtomicInteger holders = new java.util.concurrent.atomic.AtomicInteger();
    private final Object room = new Object();

    MemoryBudget(long limit) {
        if (limit < 1) {
            throw new IllegalArgumentException("a memory budget takes at least one byte, not " + limit);
        }
        this.limit = limit;
    }

    long used() {
        return used.get();
    }

    long limit() {
        return limit;
    }

    /** A lane starts holding some of it ({@code +1}), or holds none any more ({@code -1}). */
    void holding(int change) {
        holders.addAndGet(change);
    }

    /**
     * A lane's share of it: the limit divided among the lanes holding some. While it is spent, a
     * lane holding its share or more is as full as one whose own budget is ({@link Lane}): routing
     * waits for it in turn, and one that holds routing back so while others starve goes durable.
     */
    long share() {
        return limit / Math.max(1, holders.get());
    }

    /** Lanes holding some of it now. */
    int holders() {
        return holders.get();
    }

    /** Whether it is spent: routing waits, and lanes whose events cannot move give them to their durable queue. */
    boolean spent() {
        return used.get() >= limit;
    }

    void take(long bytes) {
        used.addAndGet(bytes);
    }

    void release(long bytes) {
        long left = used.addAndGet(-bytes);
        if (left < limit && left + bytes >= limit) {
            synchronized (room) {
                room.notifyAll();
            }
        }
    }

    /** Wakes whoever waits for room (a lane under its share again, though the budget is still spent). */
    void wake() {
        synchronized (room) {
            room.notifyAll();
        }
    }

    /**
     * Waits while it is spent, at most {@code millis}; returns whether it is spent still. The
     * caller decides what to do between waits (nudge the lanes holding it, stop).
     */
    boolean awaitRoom(long millis) throws InterruptedException {
        synchronized (room) {
            if (spent()) {
                room.wait(millis);
            }
        }
        return spent();
    }

    @Override
    public String toString() {
        return (limit >= 1 << 20 ? (limit >> 20) + " MiB" : limit + " bytes") + " for all subscriptions";
    }
}
