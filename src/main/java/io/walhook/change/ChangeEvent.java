package io.walhook.change;

import java.nio.charset.StandardCharsets;

import io.walhook.pgoutput.Lsn;
import io.walhook.pgoutput.ReplicaIdentity;
import io.walhook.pgoutput.TupleData;

/**
 * One change as walhook delivers it (docs/events.md), still in pgoutput's form: the
 * tuples are the decoded (detached) bytes and become JSON only in {@link EventJsonWriter}.
 *
 * <p>{@link #id()} is stable: the commit LSN of its transaction and its position in it, so the
 * same change always has the same id across retries, restarts and redelivery.
 */
public final class ChangeEvent {

    private final Operation op;
    private final RelationInfo relation;
    private final TupleData key;
    private final TupleData oldRow;
    private final TupleData newRow;
    private final Lsn lsn;
    private final TxInfo tx;
    private final int seq;
    private final boolean truncateCascade;
    private final boolean truncateRestartIdentity;
    private final String messagePrefix;
    private final byte[] messageContent;
    private final boolean messageTransactional;
    /** The backfill a {@link Operation#READ} event belongs to; null for every other event. */
    private final String backfillId;
    /** {@link #id()}, made on first use: the writer, the sender and logs all ask (a benign race, like String's hash). */
    private String id;

    /**
     * Roughly the memory it holds: its rows' values, a message's content, and a fixed overhead.
     * What the hand-off between reader and delivery is bounded by.
     */
    public long memoryBytes() {
        long bytes = 256;
        bytes += key == null ? 0 : key.valueBytes();
        bytes += oldRow == null ? 0 : oldRow.valueBytes();
        bytes += newRow == null ? 0 : newRow.valueBytes();
        bytes += messageContent == null ? 0 : messageContent.length;
        return bytes;
    }

    private ChangeEvent(Operation op, RelationInfo relation, TupleData key, TupleData oldRow, TupleData newRow, Lsn lsn,
            TxInfo tx, int seq, boolean truncateCascade, boolean truncateRestartIdentity, String messagePrefix,
            byte[] messageContent, boolean messageTransactional) {
        this(op, relation, key, oldRow, newRow, lsn, tx, seq, truncateCascade, truncateRestartIdentity, messagePrefix,
                messageContent, messageTransactional, null, null);
    }

    private ChangeEvent(Operation op, RelationInfo relation, TupleData key, TupleData oldRow, TupleData newRow, Lsn lsn,
            TxInfo tx, int seq, boolean truncateCascade, boolean truncateRestartIdentity, String messagePrefix,
            byte[] messageContent, boolean messageTransactional, String backfillId, String id) {
        this.backfillId = backfillId;
        this.id = id;
        this.op = op;
        this.relation = relation;
        this.key = key;
        this.oldRow = oldRow;
        this.newRow = newRow;
        this.lsn = lsn;
        this.tx = tx;
        this.seq = seq;
        this.truncateCascade = truncateCascade;
        this.truncateRestartIdentity = truncateRestartIdentity;
        this.messagePrefix = messagePrefix;
        this.messageContent = messageContent;
        this.messageTransactional = messageTransactional;
    }

    /** An insert, update or delete: {@code key} is a 'K' tuple, {@code oldRow} an 'O' tuple, either may be null. */
    static ChangeEvent row(Operation op, RelationInfo relation, TupleData key, TupleData oldRow, TupleData newRow,
            Lsn lsn, TxInfo tx, int seq) {
        return new ChangeEvent(op, relation, key, oldRow, newRow, lsn, tx, seq, false, false, null, null, false);
    }

    static ChangeEvent truncate(RelationInfo relation, boolean cascade, boolean restartIdentity, Lsn lsn, TxInfo tx,
            int seq) {
        return new ChangeEvent(Operation.TRUNCATE, relation, null, null, null, lsn, tx, seq, cascade, restartIdentity,
                null, null, false);
    }

    static ChangeEvent message(String prefix, byte[] content, boolean transactional, Lsn lsn, TxInfo tx, int seq) {
        return new ChangeEvent(Operation.MESSAGE, null, null, null, null, lsn, tx, seq, false, false, prefix, content,
                transactional);
    }

    /**
     * A row a backfill read (op {@code read}): {@code row} is the whole row, its key columns marked by
     * {@code relation}. {@code at} is the stream position it was read at (the backfill's high
     * watermark): it orders the event with the stream's, and the JSON shows {@code tx: null}.
     * {@code id} is stable for the same row of the same backfill (made by the backfill).
     */
    public static ChangeEvent read(RelationInfo relation, TupleData row, TxInfo at, String backfillId, String id) {
        return new ChangeEvent(Operation.READ, relation, null, null, row, at.commitLsn(), at, 0, false, false, null,
                null, false, java.util.Objects.requireNonNull(backfillId), java.util.Objects.requireNonNull(id));
    }

    /** The backfill of a {@code read} event, else null. */
    public String backfillId() {
        return backfillId;
    }

    /** {@code <commit LSN as 16 hex digits>-<position in the transaction, 4 digits or more>}. */
    public String id() {
        String made = id;
        if (made == null) {
            // hex16 of the commit LSN, '-', the position zero-padded to at least 4 digits
            int digits = 4;
            for (int rest = seq / 10_000; rest > 0; rest /= 10) {
                digits++;
            }
            // as Latin-1 bytes, the String's own form: no char[] to compress
            byte[] text = new byte[17 + digits];
            tx.commitLsn().hex16(text, 0);
            text[16] = '-';
            int position = seq;
            for (int p = text.length - 1; p > 16; p--) {
                text[p] = (byte) ('0' + position % 10);
                position /= 10;
            }
            made = new String(text, StandardCharsets.ISO_8859_1);
            id = made;
        }
        return made;
    }

    public Operation op() {
        return op;
    }

    /** The table; null for a logical message. */
    public RelationInfo relation() {
        return relation;
    }

    public String schema() {
        return relation == null ? null : relation.schema();
    }

    public String table() {
        return relation == null ? null : relation.table();
    }

    /**
     * A hash of the row's identity (table and replica-identity values): changes to the same row
     * always hash alike, so they can share an ordered delivery lane. Truncates hash by table, logical
     * messages all alike. (An update that changes the key hashes by the old key.) Under REPLICA
     * IDENTITY FULL every column is "key", so the values change with every update and cannot name
     * the row: such a table's rows hash by its primary key ({@link RelationInfo#orderKey}), and
     * without one its changes all hash by the table, and keep their order in one lane.
     */
    public int rowKeyHash() {
        return keyHash(keySource());
    }

    /**
     * The row's identity after the change: {@link #rowKeyHash()}'s, except for an update that
     * changed the key ('K' tuple), whose new key hashes from the new row. Delivery orders such an
     * update after the old key's earlier changes and before the new key's later ones.
     */
    public int newRowKeyHash() {
        if (changesKey()) {
            return keyHash(newRow, key);
        }
        if (fullUpdateByPrimaryKey()) {
            return keyHash(newRow, oldRow); // FULL: its primary key may have changed, and the old row has the old one
        }
        return rowKeyHash();
    }

    /** Whether the row's identity after the change may differ from before: {@link #newRowKeyHash()} is worth computing. */
    public boolean mayChangeKey() {
        return changesKey() || fullUpdateByPrimaryKey();
    }

    private boolean fullUpdateByPrimaryKey() {
        return op == Operation.UPDATE && oldRow != null && relation != null && relation.orderKey() != null;
    }

    /**
     * Whether an update or delete of a REPLICA IDENTITY FULL table ordered by its primary key does
     * not name its row: its old row lacks a value of the key (a partition of another identity,
     * published through its root, writes its own identity's columns only, the others NULL), or a
     * delete came without one. Delivery orders it against the whole table.
     */
    public boolean rowUnnamed() {
        int[] orderKey = relation == null ? null : relation.orderKey();
        if (orderKey == null || op != Operation.UPDATE && op != Operation.DELETE) {
            return false;
        }
        TupleData old = key != null ? key : oldRow;
        if (old == null) {
            // an update without its old row kept its key (the reader orders by the key only when every partition's
            // identity is FULL or the default); a delete always names its row
            return op == Operation.DELETE;
        }
        for (int i : orderKey) {
            if (i >= old.size() || !old.hasValue(i)) {
                return true;
            }
        }
        return false;
    }

    /**
     * What fills an unchanged TOASTed value of the new row: the old row under REPLICA IDENTITY
     * FULL, else the 'K' tuple, which holds a key column stored out of line and kept (the server
     * sends the key then, though it did not change), else nothing.
     */
    public TupleData newRowFill() {
        return oldRow != null ? oldRow : key;
    }

    /** Whether this is an update that changed the row's key (its 'K' tuple is the old key). */
    public boolean changesKey() {
        return op == Operation.UPDATE && key != null;
    }

    private int keyHash(TupleData source) {
        return keyHash(source, null);
    }

    /** The hash of {@code source}'s key, its unchanged TOASTed key columns taken from {@code unchangedFrom}. */
    private int keyHash(TupleData source, TupleData unchangedFrom) {
        if (relation == null) {
            return 0;
        }
        int h = Long.hashCode(relation.oid());
        if (source == null) {
            return h;
        }
        int[] orderKey = relation.orderKey();
        if (relation.replicaIdentity() == ReplicaIdentity.FULL) {
            if (orderKey == null) {
                return h;
            }
            for (int rank = 0; rank < orderKey.length; rank++) {
                h = 31 * hashInto(source, unchangedFrom, orderKey[rank], h) + rank;
            }
            return h;
        }
        // key columns only, each by its value and its rank among them: adding or dropping another
        // column (ALTER TABLE) must not change a row's identity
        int rank = 0;
        for (int i = 0; i < source.size(); i++) {
            if (relation.isKey(i)) {
                h = 31 * hashInto(source, unchangedFrom, i, h) + rank++;
            }
        }
        return h;
    }

    /** {@code h} with column {@code i}'s value of {@code source} (an unchanged TOASTed one from {@code unchangedFrom}). */
    private static int hashInto(TupleData source, TupleData unchangedFrom, int i, int h) {
        TupleData from = unchangedFrom != null && source.isUnchangedToast(i) ? unchangedFrom : source;
        return i < from.size() && from.hasValue(i) ? from.hashInto(i, h) : h;
    }

    /**
     * The tuple the event's key is read from: the 'K' tuple (an update that changed the key, a
     * delete), else the old row (REPLICA IDENTITY FULL), else the new row (an insert, an update
     * that kept its key, a backfill's read). The writer, filters and lanes all take it from here.
     */
    public TupleData keySource() {
        return key != null ? key : oldRow != null ? oldRow : newRow;
    }

    public TupleData keyTuple() {
        return key;
    }

    /** The 'O' tuple (the whole old row under REPLICA IDENTITY FULL), or null. */
    public TupleData oldRow() {
        return oldRow;
    }

    /** The new row of an insert or update, or null. */
    public TupleData newRow() {
        return newRow;
    }

    /** The change's own WAL position (not unique: a multi-row insert shares one). */
    public Lsn lsn() {
        return lsn;
    }

    public TxInfo tx() {
        return tx;
    }

    /** Position in the transaction, from 1 (0 for a non-transactional message). */
    public int seq() {
        return seq;
    }

    public boolean truncateCascade() {
        return truncateCascade;
    }

    public boolean truncateRestartIdentity() {
        return truncateRestartIdentity;
    }

    public String messagePrefix() {
        return messagePrefix;
    }

    public byte[] messageContent() {
        return messageContent;
    }

    public boolean messageTransactional() {
        return messageTransactional;
    }

    @Override
    public String toString() {
        return id() + " " + op.wireName() + (relation == null ? " message " + messagePrefix : " " + relation);
    }
}
