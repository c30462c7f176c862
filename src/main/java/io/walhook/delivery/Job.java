package io.walhook.delivery;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import io.walhook.pgoutput.Lsn;

/**
 * One event's copy for one subscription, as written for its format: from routing (volatile: its
 * {@link #done} holds the slot back until it is delivered or durably queued) or loaded from the
 * durable queue (durable: it has a row there, and no acknowledgement is waiting on it).
 *
 * <p>Mutable, and touched only by its lane (one thread at a time); the fields from {@code pending}
 * on belong to {@link KeyedQueue}.
 */
final class Job {

    final String eventId;
    final Lsn commitLsn;
    final Instant commitTime;
    final byte[] body;
    final String contentType;
    final Map<String, String> headers;
    /** The AMQP address it resolved to when routed; null for webhooks. */
    final String address;
    /**
     * Its event's schema, table and operation ({@link io.walhook.routing.Destination.Amqp#parts}):
     * an AMQP destination that replaced the one it was routed to makes its address from them. Null
     * for a row queued by a walhook from before they were kept.
     */
    String[] addressParts;
    final Ordering ordering;
    private final long memoryBytes;
    /** The table and operation of a job routed here (for its row key); null for one read from the durable queue. */
    io.walhook.change.RelationInfo relation;
    /** Its place in its lane's arrivals, and when routing handed it over (System.nanoTime). */
    long arrival;
    long handedOverNanos;
    /** The row's key as JSON ({@code {"id": 42}}), for the durable queue's key filter; null when unknown or none. */
    String rowKey;
    /** The acknowledgement of a volatile job, run once: when delivered, or when it is durably queued. */
    Runnable done;
    /** Whether it has a row in the durable queue. */
    boolean durable;
    /** Its row's id in the durable queue, when it was read from there (0 otherwise). */
    long rowId;
    /** Attempts already made at it (a durable job's count comes from its row). */
    int attempts;
    /** A backfill's row: sent when no live change is ready ({@link KeyedQueue}). */
    boolean background;
    /**
     * The subscription as routing matched it, until its lane takes the job: routed under another
     * definition (tables, operations, filter) than the lane's by then (the rest of a transaction
     * routed as it was when the subscription changed), it goes through the durable queue.
     */
    io.walhook.routing.Subscription routedBy;

    // KeyedQueue's
    int pending;
    List<Job> successors;
    boolean finished;
    boolean taken;
    /** Taken into a batch after the earlier job of its row there, not on its own: it starts no group. */
    boolean chained;
    Job previous;
    Job next;

    Job(String eventId, Lsn commitLsn, Instant commitTime, byte[] body, String contentType, Map<String, String> headers,
            String address, Ordering ordering) {
        this.eventId = eventId;
        this.commitLsn = commitLsn;
        this.commitTime = commitTime;
        this.body = body;
        this.contentType = contentType;
        this.headers = headers;
        this.address = address;
        this.ordering = ordering;
        this.memoryBytes = memoryBytes(body, headers);
    }

    void addSuccessor(Job later) {
        if (successors == null) {
            successors = new ArrayList<>(2);
        }
        successors.add(later);
    }

    /**
     * Bytes it holds in memory, roughly: its body, its headers' text, and a fixed overhead for the
     * job, its ids, its ordering and its place in the lane's queue (about what a heap histogram of
     * 10,000 tenant lanes shows per job).
     */
    long memoryBytes() {
        return memoryBytes;
    }

    private static long memoryBytes(byte[] body, Map<String, String> headers) {
        long bytes = body.length + 640L;
        if (headers != null) {
            for (Map.Entry<String, String> header : headers.entrySet()) {
                bytes += header.getKey().length() + header.getValue().length() + 32;
            }
        }
        return bytes;
    }

    @Override
    public String toString() {
        return eventId;
    }
}
