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
 * <p>Only rows written before this run are remembered, and of those only rows that committed at or
 * after the position the stream resumed from, in this run or in any run after the one that wrote
 * the row ({@link ParkedEventStore#resendsFrom}: the resends queued behind it all did, those an
 * earlier run queued too; an older queued change precedes none of them), at most {@link #LIMIT} rows' keys in arrays (4 MB at most); a
 * row written in this run at a commit LSN means every resend older than it was written, and read,
 * before it, so what is older is forgotten. Nothing is kept once the lane delivers directly.
 */
final class ReplayedRows {

    /**
     * Row keys remembered at most, three quarters of 2^17 slots of 32 bytes (4 MB): beyond them, a
     * resend of an older change of a row not remembered is delivered again, behind the newer one
     * (the lane says so in its log). A change of a row's key counts its two keys.
     */
    static final int LIMIT = 98_304;

    /** Per row key: the commit LSN, position in its transaction and queue row id of its newest change read. */
    private final RowMarks rows = new RowMarks();
    /** Rows written before this run not remembered for {@link #LIMIT}, since the lane last said so. */
    private long unremembered;
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
        return supersededOnRead(job, writtenBefore, 0);
    }

    /**
     * As {@link #supersededOnRead(Job, long)}; {@code resumedFrom}: the earliest position the stream
     * resumed from in this run or a run after the one that wrote this row (unsigned; 0 when
     * unknown): a row written before this run that committed before it precedes every resend
     * queued behind it, and is not remembered.
     */
    boolean supersededOnRead(Job job, long writtenBefore, long resumedFrom) {
        return supersededOnRead(job, writtenBefore, resumedFrom, 0);
    }

    /**
     * As {@link #supersededOnRead(Job, long, long)}; {@code earlierHistoryUpTo}: the newest row id
     * queued in a history before the source's (a checkpoint of it replaced after a failover, in this
     * run or an earlier one): such a row is neither a resend nor remembered, its position is not
     * comparable with the changes the stream sends.
     */
    boolean supersededOnRead(Job job, long writtenBefore, long resumedFrom, long earlierHistoryUpTo) {
        if (job.rowId <= earlierHistoryUpTo) {
            return false;
        }
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
                ? rows.newer(ordering.key(), lsn, seq, rowId) || rows.newer(ordering.otherKey(), lsn, seq, rowId)
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
        if (Long.compareUnsigned(lsn, resumedFrom) < 0) {
            return false; // no resend is older than it
        }
        if (ordering.scope() == Ordering.Scope.ROW) {
            boolean kept = rows.remember(ordering.key(), lsn, seq, rowId);
            kept &= ordering.otherKey() == ordering.key() || rows.remember(ordering.otherKey(), lsn, seq, rowId);
            if (!kept) {
                unremembered++;
            }
        } else {
            remember(truncates, ordering.table(), lsn, seq, rowId);
        }
        remember(tables, ordering.table(), lsn, seq, rowId);
        return false;
    }

    /**
     * The lane reads again rows it read past, before rows of this run it read since: what those
     * rows would have it forget is kept, as they are no longer the latest read.
     */
    void readAgainFromEarlier() {
        forgetting = false;
    }

    /** A page was read: what is older than a row written in this run that it held is forgotten. */
    void pageRead() {
        if (forgetting) {
            for (Map<Long, long[]> map : java.util.List.of(truncates, tables)) {
                map.values().removeIf(seen -> Long.compareUnsigned(seen[0], forgetBelow) < 0);
            }
            rows.forgetBelow(forgetBelow);
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

    /** Rows written before this run that were not remembered for {@link #LIMIT} since the last call (the lane logs it). */
    long takeUnremembered() {
        long count = unremembered;
        unremembered = 0;
        return count;
    }

    private static boolean newer(Map<Long, long[]> map, long key, long lsn, long seq, long rowId) {
        long[] seen = map.get(key);
        if (seen == null || seen[2] >= rowId) {
            return false;
        }
        int byLsn = Long.compareUnsigned(seen[0], lsn);
        return byLsn > 0 || byLsn == 0 && seen[1] > seq;
    }

    private static void remember(Map<Long, long[]> map, long key, long lsn, long seq, long rowId) {
        long[] seen = map.get(key);
        if (seen == null) {
            map.put(key, new long[] {lsn, seq, rowId});
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
     * Row keys to the commit LSN, position and queue row id of their newest change read, in arrays
     * (open addressing, linear probing): a boxed map took about 100 bytes a key, which held the
     * limit to 10,000 keys, short of a queue parked while a destination was down.
     */
    static final class RowMarks {

        private static final int SMALL = 16;
        private long[] keys = new long[SMALL];
        private long[] lsns = new long[SMALL];
        private long[] seqs = new long[SMALL];
        /** 0: an empty slot (queue row ids start at 1). */
        private long[] rowIds = new long[SMALL];
        private int size;

        private static int slot(long key, int mask) {
            long h = key * 0x9E3779B97F4A7C15L;
            return (int) (h ^ (h >>> 32)) & mask;
        }

        int size() {
            return size;
        }

        /** Whether a change of {@code key} read from a lower row id is newer than this one. */
        boolean newer(long key, long lsn, long seq, long rowId) {
            int mask = keys.length - 1;
            for (int i = slot(key, mask); rowIds[i] != 0; i = (i + 1) & mask) {
                if (keys[i] == key) {
                    if (rowIds[i] >= rowId) {
                        return false;
                    }
                    int byLsn = Long.compareUnsigned(lsns[i], lsn);
                    return byLsn > 0 || byLsn == 0 && seqs[i] > seq;
                }
            }
            return false;
        }

        /** Remembers this change of {@code key} if it is its newest read; false when the key is new and the marks full. */
        boolean remember(long key, long lsn, long seq, long rowId) {
            int mask = keys.length - 1;
            int i = slot(key, mask);
            for (; rowIds[i] != 0; i = (i + 1) & mask) {
                if (keys[i] == key) {
                    int byLsn = Long.compareUnsigned(lsn, lsns[i]);
                    if (byLsn > 0 || byLsn == 0 && seq > seqs[i]) {
                        lsns[i] = lsn;
                        seqs[i] = seq;
                        rowIds[i] = rowId;
                    }
                    return true;
                }
            }
            if (size >= LIMIT) {
                return false;
            }
            keys[i] = key;
            lsns[i] = lsn;
            seqs[i] = seq;
            rowIds[i] = rowId;
            if (++size * 4 > keys.length * 3) {
                resize(keys.length * 2);
            }
            return true;
        }

        /** Forgets the marks of changes committed before {@code lsn}. */
        void forgetBelow(long lsn) {
            int kept = 0;
            for (int i = 0; i < keys.length; i++) {
                if (rowIds[i] != 0 && Long.compareUnsigned(lsns[i], lsn) >= 0) {
                    kept++;
                }
            }
            if (kept < size) {
                int capacity = SMALL;
                while (kept * 4 >= capacity * 3) {
                    capacity *= 2;
                }
                rebuild(capacity, lsn);
            }
        }

        void clear() {
            keys = new long[SMALL];
            lsns = new long[SMALL];
            seqs = new long[SMALL];
            rowIds = new long[SMALL];
            size = 0;
        }

        private void resize(int capacity) {
            rebuild(capacity, 0);
        }

        /** The marks again in {@code capacity} slots, those committed before {@code below} (unsigned) left out. */
        private void rebuild(int capacity, long below) {
            long[] oldKeys = keys;
            long[] oldLsns = lsns;
            long[] oldSeqs = seqs;
            long[] oldRowIds = rowIds;
            keys = new long[capacity];
            lsns = new long[capacity];
            seqs = new long[capacity];
            rowIds = new long[capacity];
            size = 0;
            int mask = capacity - 1;
            for (int j = 0; j < oldKeys.length; j++) {
                if (oldRowIds[j] == 0 || Long.compareUnsigned(oldLsns[j], below) < 0) {
                    continue;
                }
                int i = slot(oldKeys[j], mask);
                while (rowIds[i] != 0) {
                    i = (i + 1) & mask;
                }
                keys[i] = oldKeys[j];
                lsns[i] = oldLsns[j];
                seqs[i] = oldSeqs[j];
                rowIds[i] = oldRowIds[j];
                size++;
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
