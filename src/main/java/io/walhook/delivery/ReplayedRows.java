package io.walhook.delivery;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

import io.walhook.pgoutput.Lsn;

/**
 * Finds, in a lane's durable queue, the changes the stream sent again after a restart that are
 * older than a change of their row queued before them. After a crash the stream resends every
 * change after the checkpoint, which another subscription's retries can hold far back; a queued
 * change's resend is not written twice (the queue keeps one row per event id), but the resend of
 * an older change of its row, delivered directly before the crash, is written behind it, and was
 * delivered after it: the receiver was left with the older state.
 *
 * <p>A row of the queue is such a resend when a row read before it (a lower id) holds a change of
 * the same row key from later in the stream. Changes of a row are queued in stream order, and a
 * change is queued only once the earlier changes of its row were delivered or queued before it,
 * so the older change was delivered before the crash: it is dropped, not delivered again. Only
 * what can still be resent is remembered: changes ahead of the newest the stream brought the lane
 * since it started, at most {@link #LIMIT} rows' keys; none once the lane delivers directly.
 */
final class ReplayedRows {

    /** Row keys remembered at most (a few MB): beyond them, a resend is delivered again, as before. */
    static final int LIMIT = 50_000;

    /** Per row key: the commit LSN, position in its transaction and queue row id of its newest change read. */
    private final Map<Long, long[]> newest = new HashMap<>();
    /** The newest commit LSN the stream brought the lane (once {@link #anyStreamed}): nothing older is queued from now on. */
    private long streamed;
    private boolean anyStreamed;
    private long readsSincePrune;

    /** The stream brought the lane a change committed at {@code commitLsn}. */
    void streamed(Lsn commitLsn) {
        if (commitLsn != null && (!anyStreamed || Long.compareUnsigned(commitLsn.value(), streamed) > 0)) {
            streamed = commitLsn.value();
            anyStreamed = true;
        }
    }

    /**
     * Whether {@code job}, read from the durable queue (its row id set), is a resend of a change
     * older than one of its row read before it; else it is remembered, if it is ahead of the stream.
     */
    boolean supersededOnRead(Job job) {
        if (job.ordering.scope() != Ordering.Scope.ROW || job.commitLsn == null) {
            return false;
        }
        long seq = position(job.eventId);
        if (seq < 0) {
            return false; // not a change of the stream (a backfill's row)
        }
        long lsn = job.commitLsn.value();
        if (newer(job.ordering.key(), lsn, seq, job.rowId) || newer(job.ordering.otherKey(), lsn, seq, job.rowId)) {
            return true;
        }
        if (anyStreamed && Long.compareUnsigned(lsn, streamed) < 0) {
            return false; // the stream is past it: nothing older of its row is queued from now on
        }
        if (++readsSincePrune >= 1024) {
            prune();
        }
        remember(job.ordering.key(), lsn, seq, job.rowId);
        if (job.ordering.otherKey() != job.ordering.key()) {
            remember(job.ordering.otherKey(), lsn, seq, job.rowId);
        }
        return false;
    }

    /** The lane delivers directly: no resend is queued behind a row it read any more. */
    void clear() {
        newest.clear();
    }

    int remembered() {
        return newest.size();
    }

    private boolean newer(long key, long lsn, long seq, long rowId) {
        long[] seen = newest.get(key);
        if (seen == null || seen[2] >= rowId) {
            return false;
        }
        int byLsn = Long.compareUnsigned(seen[0], lsn);
        return byLsn > 0 || byLsn == 0 && seen[1] > seq;
    }

    private void remember(long key, long lsn, long seq, long rowId) {
        long[] seen = newest.get(key);
        if (seen == null) {
            if (newest.size() < LIMIT) {
                newest.put(key, new long[] {lsn, seq, rowId});
            }
            return;
        }
        int byLsn = Long.compareUnsigned(lsn, seen[0]);
        if (byLsn > 0 || byLsn == 0 && seq > seen[1]) {
            seen[0] = lsn;
            seen[1] = seq;
            seen[2] = rowId;
        }
    }

    private void prune() {
        readsSincePrune = 0;
        if (!anyStreamed) {
            return;
        }
        for (Iterator<long[]> it = newest.values().iterator(); it.hasNext();) {
            if (Long.compareUnsigned(it.next()[0], streamed) < 0) {
                it.remove();
            }
        }
    }

    /**
     * The position in its transaction of a stream change's id ({@code <16 hex digits>-<decimal
     * position>}), or -1 for another id (a backfill's read event).
     */
    static long position(String eventId) {
        int length = eventId.length();
        if (length < 21 || length > 35 || eventId.charAt(16) != '-') {
            return -1;
        }
        for (int i = 0; i < 16; i++) {
            if (Character.digit(eventId.charAt(i), 16) < 0) {
                return -1;
            }
        }
        long position = 0;
        for (int i = 17; i < length; i++) {
            char c = eventId.charAt(i);
            if (c < '0' || c > '9') {
                return -1;
            }
            position = position * 10 + (c - '0');
        }
        return position;
    }
}
