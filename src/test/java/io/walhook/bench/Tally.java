package io.walhook.bench;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/** What a sink received: events and bytes, when the first came and when the target was reached. */
final class Tally {

    private final long target;
    private final AtomicLong events = new AtomicLong();
    private final LongAdder bytes = new LongAdder();
    private final CountDownLatch complete = new CountDownLatch(1);
    private volatile long firstEventNanos;
    private volatile long completedNanos;

    Tally(long target) {
        this.target = target;
    }

    /** {@code n} events arrived in {@code length} bytes. */
    void record(long n, long length) {
        bytes.add(length);
        if (n > 0 && firstEventNanos == 0) {
            firstEventNanos = System.nanoTime();
        }
        long total = events.addAndGet(n);
        if (total >= target && completedNanos == 0) {
            completedNanos = System.nanoTime();
            complete.countDown();
        }
    }

    boolean await(long timeout, TimeUnit unit) throws InterruptedException {
        return complete.await(timeout, unit);
    }

    long target() {
        return target;
    }

    long events() {
        return events.get();
    }

    long bytes() {
        return bytes.sum();
    }

    long firstEventNanos() {
        return firstEventNanos;
    }

    long completedNanos() {
        return completedNanos;
    }
}
