package io.walhook.delivery;

import java.util.HashMap;
import java.util.Map;

/**
 * Finds, in a lane's durable queue, the changes the stream sent again after a restart that are
 * older than a change of their row queued before them. After a crash the stream resends every
 * change after the checkpoint, which another subscription's retries can hold far back; a queued
 * change's resend is not written twice (the queue keeps one row per event id), but the resend of
 * an older change of its row, delivered directly before the crash, is written behind it, and was
 * delivered after it: the receiver was left with the older state.
 *
 * <p>A row of the queue is such a resend when a row read before it (a lower id) written before
 * this run holds a later change of the same row (or a later TRUNCATE of its table; for a
 * TRUNCATE, a later change of any row of its table). A change ordered against its whole table
 * ({@link Ordering.Scope#REKEYED}: the first after its table's key changed) counts as a TRUNCATE
 * does: it was queued only after every earlier change of its table was delivered or queued, and
 * its row's earlier changes hash by another key. Changes are queued in stream order, and one
 * only once what it must follow was delivered or queued before it, so the older change was
 * delivered before the crash: it is dropped, not delivered again.
 *
 * <p>Only rows written before this run are remembered, at most {@link #LIMIT} rows' keys; a row
 * written in this run at a commit LSN means every resend older than it was written, and read,
 * before it, so what is older is forgotten. Nothing is kept once the lane delivers directly.
 */
final class ReplayedRows {

    /** Row keys remembered at most (about a MB): beyond them, a resend is delivered again, as before. */
    static final int LIMIT = 10_000;

    /** Per row key: the commit LSN, position in its transaction and queue row id of its newest change read. */
    private final Map<Long, long[]> rows = new HashMap<>();
    /** Per table (or logical messages): the same of its newest TRUNCATE (message) read. */
    private final Map<Long, long[]> truncates = new HashMap<>();
    /** Per table: the same of its newest change of any kind read. */
    private final Map<Long, long[]> tables = new HashMap<>();
    /** The newest commit LSN of a row written in this run read so far: older ones are forgotten at the page's end. */
    private long forgetBelow;
    private boolean forgetting;

    /**
     * Whether {@code job}, read from the durable queue (its row id set), is a resend of a change
     * older than one read before it; else it is remembered, if its row was written before this run
     * (row ids up to {@code writtenBefore}).
     */
    boolean supersededOnRead(Job job, long writtenBefore) {
        Ordering ordering = job.ordering;
        if (ordering.scope() == Ordering.Scope.ALL || job.commitLsn == null) {
            return false; // parked before orderings were kept
        }
        long seq = position(job.eventId);
        if (seq < 0) {
            return false; // not a change of the stream (a backfill's row)
        }
        long lsn = job.commitLsn.value();
        long rowId = job.rowId;
        boolean superseded = ordering.scope() == Ordering.Scope.ROW
                ? newer(rows, ordering.key(), lsn, seq, rowId) || newer(rows, ordering.otherKey(), lsn, seq, rowId)
                        || newer(truncates, ordering.table(), lsn, seq, rowId)
                : newer(tables, ordering.table(), lsn, seq, rowId);
        if (superseded) {
            return true;
        }
        if (rowId > writtenBefore) {
            if (!forgetting || Long.compareUnsigned(lsn, forgetBelow) > 0) {
                forgetBelow = lsn;
                forgetting = true;
            }
            return false;
        }
        if (ordering.scope() == Ordering.Scope.ROW) {
            remember(rows, ordering.key(), lsn, seq, rowId);
            remember(rows, ordering.otherKey(), lsn, seq, rowId);
        } else {
            remember(truncates, ordering.table(), lsn, seq, rowId);
        }
        remember(tables, ordering.table(), lsn, seq, rowId);
        return false;
    }

    /** A page was read: what is older than a row written in this run that it held is forgotten. */
    void pageRead() {
        if (forgetting) {
            for (Map<Long, long[]> map : java.util.List.of(rows, truncates, tables)) {
                map.values().removeIf(seen -> Long.compareUnsigned(seen[0], forgetBelow) < 0);
            }
        }
    }

    /** The lane delivers directly: no resend is queued behind a row it read any more. */
    void clear() {
        rows.clear();
        truncates.clear();
        tables.clear();
    }

    int remembered() {
        return rows.size() + truncates.size();
    }

    private static boolean newer(Map<Long, long[]> map, long key, long lsn, long seq, long rowId) {
        long[] seen = map.get(key);
        if (seen == null || seen[2] >= rowId) {
            return false;
        }
        int byLsn = Long.compareUnsigned(seen[0], lsn);
        return byLsn > 0 || byLsn == 0 && seen[1] > seq;
    }

    private void remember(Map<Long, long[]> map, long key, long lsn, long seq, long rowId) {
        long[] seen = map.get(key);
        if (seen == null) {
            if (map != rows || rows.size() < LIMIT) {
                map.put(key, new long[] {lsn, seq, rowId});
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
