package io.walhook.checkpoint;

import java.util.Collection;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.ToLongFunction;

/**
 * A bounded queue between two threads that wakes its consumer only when the consumer can act:
 * when as many items are queued as it waits for. A lane waiting to fill a batch of 500 sleeps
 * until the 500th or its deadline, not once per item; a producer handing over chunks wakes the
 * consumer once per chunk. On this project's machines a wake-up (a futex call and a context
 * switch) cost more than routing the event that caused it.
 *
 * <p>One consumer thread; any number of producers. A full queue blocks producers (back-pressure):
 * full in items, or, when built with a weight, in bytes: an item that would take the queued bytes
 * past the limit waits for room, unless the queue is empty (one item bigger than the limit passes
 * alone).
 */
public final class HandOffQueue<T> {

    private final Object[] items;
    /** Each queued item's weight, at its index in {@link #items}. */
    private final long[] weights;
    private final long maxBytes;
    private final ToLongFunction<? super T> weight;
    private long bytes;
    /** Producers waiting for room: the queue is as full as it will get, whatever its count. */
    private int producersWaiting;
    private int head;
    private int count;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition enough = lock.newCondition();
    private final Condition notFull = lock.newCondition();
    /** While the consumer waits: how many items it waits for; otherwise none (no signal needed). */
    private int wanted = Integer.MAX_VALUE;

    public HandOffQueue(int capacity) {
        this(capacity, Long.MAX_VALUE, item -> 0);
    }

    /** A queue of at most {@code capacity} items and, together, {@code maxBytes} by {@code weight}. */
    public HandOffQueue(int capacity, long maxBytes, ToLongFunction<? super T> weight) {
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity must be at least 1, not " + capacity);
        }
        if (maxBytes < 1) {
            throw new IllegalArgumentException("maxBytes must be at least 1, not " + maxBytes);
        }
        this.items = new Object[capacity];
        this.weights = new long[capacity];
        this.maxBytes = maxBytes;
        this.weight = weight;
    }

    /** Adds an item, waiting while the queue is full. */
    public void put(T item) throws InterruptedException {
        long w = weight.applyAsLong(item);
        lock.lockInterruptibly();
        try {
            while (noRoomFor(w)) {
                wakeConsumerIfWaiting();
                producersWaiting++;
                try {
                    notFull.await();
                } finally {
                    producersWaiting--;
                }
            }
            enqueue(item, w);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Adds items from {@code from}, starting at index {@code start}, waiting at most {@code timeout}
     * for room; returns the index of the first item not added (the list's size when all were).
     * Interrupted while it waits, it returns that index too once it added any, the thread's
     * interrupt kept (the items added are the consumer's now); it throws only when it added none.
     */
    public int offerAll(List<? extends T> from, int start, long timeout, TimeUnit unit) throws InterruptedException {
        long nanos = unit.toNanos(timeout);
        int next = start;
        lock.lockInterruptibly();
        try {
            while (next < from.size()) {
                long w = weight.applyAsLong(from.get(next));
                while (noRoomFor(w)) {
                    wakeConsumerIfWaiting();
                    if (nanos <= 0) {
                        return next;
                    }
                    producersWaiting++;
                    try {
                        nanos = notFull.awaitNanos(nanos);
                    } catch (InterruptedException e) {
                        if (next == start) {
                            throw e;
                        }
                        Thread.currentThread().interrupt();
                        return next;
                    } finally {
                        producersWaiting--;
                    }
                }
                enqueue(from.get(next++), w);
            }
            return next;
        } finally {
            lock.unlock();
        }
    }

    /** The next item, waiting for one. */
    public T take() throws InterruptedException {
        lock.lockInterruptibly();
        try {
            while (count == 0) {
                await(1);
            }
            return dequeue();
        } finally {
            lock.unlock();
        }
    }

    /** The next item, waiting at most {@code timeout} for one; null when none came. */
    public T poll(long timeout, TimeUnit unit) throws InterruptedException {
        long nanos = unit.toNanos(timeout);
        lock.lockInterruptibly();
        try {
            while (count == 0) {
                if (nanos <= 0) {
                    return null;
                }
                nanos = awaitNanos(1, nanos);
            }
            return dequeue();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits until {@code min} items are queued, a producer waits for room, or {@code deadlineNanos}
     * ({@link System#nanoTime()}) passes, then moves up to {@code max} of them into {@code into};
     * returns how many it moved.
     */
    public int drainWhenAtLeast(Collection<? super T> into, int min, int max, long deadlineNanos)
            throws InterruptedException {
        int need = Math.min(min, items.length); // a full queue is as much as will come
        lock.lockInterruptibly();
        try {
            while (count < need && !producerBlocked()) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                awaitNanos(need, left);
            }
            return drain(into, max);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits until the queue is full (in items, or a producer waits for room) or {@code deadlineNanos}
     * ({@link System#nanoTime()}) passes; true when full. A consumer that cannot take (a lane
     * retrying a failing destination) learns that its producers are about to block.
     */
    public boolean awaitFull(long deadlineNanos) throws InterruptedException {
        lock.lockInterruptibly();
        try {
            while (count < items.length && !producerBlocked()) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                awaitNanos(items.length, left);
            }
            return count == items.length || producerBlocked();
        } finally {
            lock.unlock();
        }
    }

    /** Moves up to {@code max} queued items into {@code into} without waiting; returns how many. */
    public int drainTo(Collection<? super T> into, int max) {
        lock.lock();
        try {
            return drain(into, max);
        } finally {
            lock.unlock();
        }
    }

    public int size() {
        lock.lock();
        try {
            return count;
        } finally {
            lock.unlock();
        }
    }

    /** The weight of what is queued, in bytes (0 for a queue without a weight). */
    public long bytes() {
        lock.lock();
        try {
            return bytes;
        } finally {
            lock.unlock();
        }
    }

    public int remainingCapacity() {
        lock.lock();
        try {
            return items.length - count;
        } finally {
            lock.unlock();
        }
    }

    /**
     * A producer waits for room that what is queued denies it. (An empty queue denies no one: a
     * producer still counted as waiting there has been let in and not yet run.)
     */
    private boolean producerBlocked() {
        return producersWaiting > 0 && count > 0;
    }

    private boolean noRoomFor(long w) {
        return count == items.length || count > 0 && bytes + w > maxBytes;
    }

    private void enqueue(T item, long w) {
        int at = (head + count) % items.length;
        items[at] = item;
        weights[at] = w;
        bytes += w;
        count++;
        if (count >= wanted) {
            wanted = Integer.MAX_VALUE; // one signal per wait
            enough.signal();
        }
    }

    @SuppressWarnings("unchecked")
    private T dequeue() {
        T item = (T) items[head];
        items[head] = null;
        bytes -= weights[head];
        head = (head + 1) % items.length;
        count--;
        notFull.signal(); // no system call unless a producer waits
        return item;
    }

    private int drain(Collection<? super T> into, int max) {
        int n = Math.min(max, count);
        for (int i = 0; i < n; i++) {
            @SuppressWarnings("unchecked")
            T item = (T) items[head];
            items[head] = null;
            bytes -= weights[head];
            head = (head + 1) % items.length;
            into.add(item);
        }
        count -= n;
        if (n > 0) {
            notFull.signalAll();
        }
        return n;
    }

    /** A producer about to wait for room: the consumer waiting for more than fits must take what there is. */
    private void wakeConsumerIfWaiting() {
        if (wanted != Integer.MAX_VALUE) {
            wanted = Integer.MAX_VALUE;
            enough.signal();
        }
    }

    private void await(int atLeast) throws InterruptedException {
        wanted = atLeast;
        try {
            enough.await();
        } finally {
            wanted = Integer.MAX_VALUE;
        }
    }

    private long awaitNanos(int atLeast, long nanos) throws InterruptedException {
        wanted = atLeast;
        try {
            return enough.awaitNanos(nanos);
        } finally {
            wanted = Integer.MAX_VALUE;
        }
    }
}
