package io.walhook.backfill;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

import io.walhook.change.ChangeEvent;
import io.walhook.change.Operation;
import io.walhook.change.RelationInfo;
import io.walhook.pgoutput.TupleData;
import io.walhook.routing.CelFilter;

/**
 * One chunk of a backfill between its two watermarks. The runner reads its rows and hands them
 * over before it commits the high watermark; the routing thread notes, from the low watermark on,
 * every row of the table the stream changes, and at the high watermark sends the rows it did not
 * (the stream's version of those is newer). Its outcome completes once every row sent is delivered
 * or durably queued.
 */
final class Chunk {

    /** One row read: its key columns' text values joined by NUL (PostgreSQL text never holds one), its event id, its values. */
    record Row(String key, String id, TupleData tuple) {
    }

    /**
     * How the chunk ended: its rows sent (after the filters), or that it must be read again, or that
     * the subscription left its table out when the stream met its high watermark (nothing sent).
     */
    record Outcome(int sent, boolean again, boolean leftOut, String why) {
        static final Outcome LEFT_OUT = new Outcome(0, false, true,
                "its subscription left its table out when the stream met its high watermark");

        Outcome(int sent) {
            this(sent, false, false, null);
        }

        /** To be read again, {@code why} saying what kept its rows from being sent (for the log, as LEFT_OUT's). */
        static Outcome again(String why) {
            return new Outcome(0, true, false, why);
        }
    }

    final String token;
    final UUID backfillId;
    final String subscriptionId;
    final SnapshotTable table;
    /** The backfill's own filter; null for none. */
    final CelFilter filter;
    /** The last key before this chunk (null: the table's start), and the chunk's own last key (null: none read). */
    final List<String> after;
    List<String> last;
    /** How many times this range was read before (a chunk read again waits a little longer each time). */
    int attempt;
    /** When it is to be read again (System.nanoTime; 0: not set), once its outcome says so. */
    long againAt;
    /** When its range was first read (System.nanoTime), for the warning about a range read again and again. */
    long since = System.nanoTime();
    /**
     * Times its range was read, its own reading included (0 for {@link #rest}, not read yet), for that
     * warning; {@link #attempt} paces and parts the readings, and counts a rest's first as one.
     */
    int readings = 1;
    /** The rows moved to other keys this chunk reads there (Watermarks.Moved); null for a range of the table. */
    List<Watermarks.Moved> moved;
    /** Whether the chunk read the table's last row. */
    boolean lastOfTable;
    /** Whether the chunk stopped before the end of what it was to read: at its byte bound (BackfillRunner.CHUNK_BYTES), or, read again, at its part. */
    boolean cut;
    /** Its rows' size, as BackfillRunner.CHUNK_BYTES counts it. */
    long bytes;
    /** Which of the runner's connections it committed on (BackfillRunner.connections), and when (System.nanoTime). */
    long connection;
    long committedAt;
    /** Set by the runner before the high watermark commits; read by the routing thread after it arrives. */
    volatile List<Row> rows;
    volatile boolean abandoned;
    /** The transactions the chunk's snapshot did not see; set with the rows. */
    volatile Unseen unseen;
    final CompletableFuture<Outcome> outcome = new CompletableFuture<>();

    // the routing thread's, between the watermarks
    private final Set<String> changed = new HashSet<>();
    /** Rows changed between the watermarks by a change that did not resend a TOASTed value: read again. */
    private final Set<String> toasted = new HashSet<>();
    private boolean truncated;
    private boolean unknownKey;
    /**
     * Key images without the chunk's key columns (a partition whose replica identity is another
     * index than its root's, published through the root), by the chunk's column positions they
     * give: the values of each, as text. A row with those values was changed. The second map
     * holds those whose change left a TOASTed value out.
     */
    private final java.util.Map<List<Integer>, Set<List<String>>> images = new java.util.HashMap<>();
    private final java.util.Map<List<Integer>, Set<List<String>>> toastedImages = new java.util.HashMap<>();
    private int imageCount;
    /** The chunk's column positions by name, made at the first image. */
    private java.util.Map<String, Integer> positions;
    /** Key images without the key a chunk matches its rows against, at most: past them it is read again. */
    static final int IMAGES = 10_000;
    private RelationInfo keysOf;
    private int[] keyIndexes;
    private final AtomicInteger remaining = new AtomicInteger();
    private int sent;
    /** The (xid, table) pairs the stream delivered just before the low watermark, newest last. */
    private long[] xidsBefore;
    private long[] oidsBefore;

    Chunk(String token, UUID backfillId, String subscriptionId, SnapshotTable table, CelFilter filter,
            List<String> after) {
        this.token = token;
        this.backfillId = backfillId;
        this.subscriptionId = subscriptionId;
        this.table = table;
        this.filter = filter;
        this.after = after;
    }

    /**
     * The part of this chunk's range after {@code from}, to be read again (its outcome says so): what a
     * reading of the range again did not take, having stopped at its byte bound or its part. Not read
     * yet, it is read at once, whole, when its turn comes.
     */
    Chunk rest(List<String> from) {
        Chunk rest = new Chunk(token + ":rest", backfillId, subscriptionId, table, filter, from);
        rest.last = last;
        rest.lastOfTable = lastOfTable;
        rest.readings = 0;
        rest.outcome.complete(Outcome.again("the rest of a range read in parts"));
        return rest;
    }

    /** The low watermark arrived: the latest (xid, table) pairs the stream delivered before it. */
    void opened(long[] xids, long[] oids) {
        xidsBefore = xids;
        oidsBefore = oids;
    }

    /**
     * What a snapshot ({@code pg_current_snapshot()}) does not see, in xids' lower 32 bits as the
     * stream carries them: the transactions in progress for it ({@code xip}), and every one from
     * {@code xmax} on (PostgreSQL lists none of those, though one may have written its commit record
     * already: it got its xid after the snapshot's latest completed one, and is not done yet).
     */
    record Unseen(long xmax, Set<Long> inProgress, Set<Long> committedBefore) {

        Unseen(long xmax, Set<Long> inProgress) {
            this(xmax, inProgress, Set.of());
        }

        /**
         * With those of {@code committing} it does not see: transactions older than the runner's first
         * (see BackfillRunner) whose commit records were written before the snapshot, waiting for a
         * synchronous standby.
         */
        Unseen committedBefore(Set<Long> committing) {
            return new Unseen(xmax, inProgress, committing.stream().filter(this::hides).collect(Collectors.toUnmodifiableSet()));
        }

        /** Whether the transaction {@code xid} (lower 32 bits) was not visible to the snapshot. */
        boolean hides(long xid) {
            return inProgress.contains(xid) || (int) (xid - xmax) >= 0; // modulo 2^32, as PostgreSQL compares xids
        }
    }

    /**
     * A transaction the chunk's snapshot did not see that changed its table before the low watermark:
     * its xid (lower 32 bits), or -1 for none.
     */
    long missedBefore() {
        Unseen unseen = this.unseen;
        if (unseen == null || xidsBefore == null) {
            return -1;
        }
        for (int i = 0; i < xidsBefore.length; i++) {
            if (oidsBefore[i] == table.oid() && unseen.hides(xidsBefore[i])) {
                return xidsBefore[i];
            }
        }
        return -1;
    }

    /**
     * Whether a transaction the snapshot did not see, though it had committed, is one the stream did
     * not deliver since the runner began: not before the low watermark ({@link #opened}), nor since
     * ({@code recentNow}). Another walhook delivered it, or this one before a restart, and what it
     * changed cannot be told: the chunk may hold rows older than the changes already delivered.
     * Its xid (lower 32 bits), or -1 for none.
     */
    long unheard(long[] recentNow) {
        Unseen unseen = this.unseen;
        if (unseen == null || unseen.committedBefore().isEmpty()) {
            return -1;
        }
        for (long xid : unseen.committedBefore()) {
            if (!holds(xidsBefore, xid) && !holds(recentNow, xid)) {
                return xid;
            }
        }
        return -1;
    }

    private static boolean holds(long[] xids, long xid) {
        if (xids != null) {
            for (long x : xids) {
                if (x == xid) {
                    return true;
                }
            }
        }
        return false;
    }

    /** A change to this chunk's table between the watermarks: its rows leave the chunk. */
    void touched(ChangeEvent event) {
        if (event.op() == Operation.TRUNCATE) {
            truncated = true; // every row read is older than the truncate
            return;
        }
        RelationInfo relation = event.relation();
        if (relation != keysOf) {
            keysOf = relation;
            keyIndexes = indexesIn(relation);
        }
        if (keyIndexes == null) {
            unknownKey = true;
            return;
        }
        boolean unchangedToast = false;
        TupleData newRow = event.newRow();
        if (newRow != null) {
            for (int i = 0; i < newRow.size() && !unchangedToast; i++) {
                unchangedToast = newRow.isUnchangedToast(i);
            }
        }
        addKey(newRow, unchangedToast);
        addKey(event.keyTuple(), unchangedToast);
        addKey(event.oldRow(), unchangedToast);
    }

    private void addKey(TupleData tuple, boolean unchangedToast) {
        if (tuple == null) {
            return;
        }
        StringBuilder key = new StringBuilder();
        for (int k = 0; k < keyIndexes.length; k++) {
            int i = keyIndexes[k];
            if (i < tuple.size() && tuple.isNull(i)) {
                // key columns are NOT NULL: an image without them (a partition whose replica identity is another
                // index than its root's) names its row by the columns it has; passed over, a row deleted in the
                // window was sent after its delete
                addImage(tuple, unchangedToast);
                return;
            }
            if (i >= tuple.size() || tuple.kind(i) != io.walhook.pgoutput.ColumnKind.TEXT) {
                unknownKey = true; // an unchanged TOASTed key, or binary: read the chunk again
                return;
            }
            if (k > 0) {
                key.append('\0');
            }
            key.append(tuple.text(i));
        }
        changed.add(key.toString());
        if (unchangedToast) {
            toasted.add(key.toString());
        }
    }

    /** Remembers a key image without the chunk's key by the columns it has (see {@link #images}). */
    private void addImage(TupleData tuple, boolean unchangedToast) {
        if (positions == null) {
            positions = new java.util.HashMap<>();
            List<io.walhook.pgoutput.PgOutputMessage.Relation.Column> columns = table.relation().columns();
            for (int c = 0; c < columns.size(); c++) {
                positions.put(columns.get(c).name(), c);
            }
        }
        List<Integer> at = new java.util.ArrayList<>();
        List<String> values = new java.util.ArrayList<>();
        for (int i = 0; i < tuple.size() && i < keysOf.columnCount(); i++) {
            Integer position = positions.get(keysOf.columnName(i));
            if (position != null && !tuple.isNull(i) && tuple.kind(i) == io.walhook.pgoutput.ColumnKind.TEXT) {
                at.add(position);
                values.add(tuple.text(i));
            }
        }
        if (at.isEmpty() || imageCount >= IMAGES) {
            unknownKey = true; // nothing to tell its row by, or too many to keep: read again
            return;
        }
        imageCount++;
        images.computeIfAbsent(at, k -> new HashSet<>()).add(values);
        if (unchangedToast) {
            toastedImages.computeIfAbsent(at, k -> new HashSet<>()).add(values);
        }
    }

    /** Whether {@code row} has the values of a key image of {@code among} (by the positions each gives). */
    private static boolean imaged(Row row, java.util.Map<List<Integer>, Set<List<String>>> among) {
        TupleData values = row.tuple();
        for (java.util.Map.Entry<List<Integer>, Set<List<String>>> given : among.entrySet()) {
            List<String> texts = new java.util.ArrayList<>(given.getKey().size());
            for (int at : given.getKey()) {
                if (at >= values.size() || values.isNull(at) || values.kind(at) != io.walhook.pgoutput.ColumnKind.TEXT) {
                    break;
                }
                texts.add(values.text(at));
            }
            if (texts.size() == given.getKey().size() && given.getValue().contains(texts)) {
                return true;
            }
        }
        return false;
    }

    /** The chunk key's columns in the stream's description of the table, by name; null when one is missing. */
    private int[] indexesIn(RelationInfo relation) {
        List<String> names = table.chunkKeyNames();
        int[] indexes = new int[names.size()];
        for (int k = 0; k < indexes.length; k++) {
            indexes[k] = -1;
            for (int i = 0; i < relation.columnCount(); i++) {
                if (relation.columnName(i).equals(names.get(k))) {
                    indexes[k] = i;
                }
            }
            if (indexes[k] < 0) {
                return null;
            }
        }
        return indexes;
    }

    /**
     * Whether the rows can be sent at the high watermark; false when the chunk must be read again: a
     * key it could not follow, or a row of it changed by an update that left a TOASTed value out
     * (dropping the row would leave the consumer without that value; read again, it is whole).
     */
    boolean consistent() {
        if (unknownKey) {
            return false;
        }
        if ((!toasted.isEmpty() || !toastedImages.isEmpty()) && rows != null) {
            for (Row row : rows) {
                if (toasted.contains(row.key()) || imaged(row, toastedImages)) {
                    return false;
                }
            }
        }
        return true;
    }

    boolean truncated() {
        return truncated;
    }

    boolean changed(Row row) {
        return changed.contains(row.key()) || !images.isEmpty() && imaged(row, images);
    }

    /** The routing thread sends {@code count} rows now; the outcome completes when the last is delivered. */
    void sending(int count) {
        sent = count;
        if (count == 0) {
            outcome.complete(new Outcome(0));
        } else {
            remaining.set(count);
        }
    }

    /** One row sent is delivered or durably queued (a delivery thread). */
    void delivered() {
        if (remaining.decrementAndGet() == 0) {
            outcome.complete(new Outcome(sent));
        }
    }
}
