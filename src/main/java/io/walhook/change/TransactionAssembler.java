package io.walhook.change;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import io.walhook.pgoutput.Lsn;
import io.walhook.pgoutput.PgOutputDecoder;
import io.walhook.pgoutput.PgOutputException;
import io.walhook.pgoutput.PgOutputMessage;
import io.walhook.pgoutput.TupleData;

/**
 * Turns one replication connection's pgoutput messages into transactions of {@link ChangeEvent}s,
 * in commit order: the relation and type caches, ordinary transactions (events flow as they
 * arrive: the server sends a transaction only once it committed), streamed transactions (buffered
 * by xid until Stream Commit, spilled to disk past a memory bound, dropped on Stream Abort, their
 * aborted subtransactions skipped), and non-transactional logical messages.
 *
 * <p>Transactions whose commit LSN is below {@link #skipCommittedBefore(Lsn)} were already handed
 * on (before a restart or reconnect) and produce nothing; their Relation messages still count.
 *
 * <p>walhook does not enable {@code two_phase}: a prepared transaction arrives as an ordinary one
 * at COMMIT PREPARED and never when rolled back, so two-phase messages are a protocol error here.
 *
 * <p>Single-threaded: the replication reader thread owns it.
 */
public final class TransactionAssembler {

    /** Where transactions go, in commit order. */
    public interface Output {
        /** A transaction begins; its events follow. */
        void begin(TxInfo tx);

        void event(ChangeEvent event);

        /** The transaction ended at {@code endLsn} with {@code events} events. */
        void commit(TxInfo tx, Lsn endLsn, int events);

        /**
         * Still at work on one message, every {@link #REPLAYED_BETWEEN_CALLS} changes of a streamed
         * transaction read back at its commit (tens of millions take minutes, during which the
         * server hears nothing unless told): the reader answers the server's keepalives meanwhile.
         */
        default void working() {
        }
    }

    /** Changes read back between two {@link Output#working} calls. */
    static final int REPLAYED_BETWEEN_CALLS = 4096;

    private final Output output;
    private final java.util.function.BiPredicate<String, String> stateTable;
    private final java.util.function.LongFunction<List<String>> primaryKey;
    private final Path spillDirectory;
    private final String slot;
    private final long streamMemoryBytes;
    private final PgOutputDecoder decoder = new PgOutputDecoder();
    /** Converters share scratch buffers: events must be written to JSON by one thread at a time. */
    private final ValueConverters valueConverters = new ValueConverters();
    private final Map<Long, RelationInfo> relations = new HashMap<>();
    /** Relation messages received so far, and by relation when its entry in {@link #relations} arrived. */
    private long relationMessages;
    private final Map<Long, Long> relationArrivals = new HashMap<>();
    /**
     * While a streamed transaction is replayed at its commit: the Relation messages of its own, which
     * decode its changes; they replace an entry of {@link #relations} afterwards only when they arrived
     * later than it (a newer Relation may have come in the meantime, on another transaction).
     */
    private Map<Long, RelationInfo> replayedRelations;
    /** The relation of the last change, while no Relation message has replaced one since. */
    private RelationInfo lastRelation;
    private final Map<Long, PgOutputMessage.Type> types = new HashMap<>();
    private final Map<Long, StreamedTransaction> streams = new LinkedHashMap<>();
    private Lsn skipBefore = Lsn.INVALID;
    private long spilled;

    // the transaction being emitted (between Begin and Commit, or during a Stream Commit replay)
    private TxInfo tx;
    private boolean skipping;
    private int seq;
    // the stream block being received
    private StreamedTransaction stream;
    /** Where spill files are written: the disk (tests give one that fails). */
    StreamedTransaction.SpillFiles spillFiles = StreamedTransaction.SpillFiles.DISK;

    /**
     * @param stateSchema walhook's own schema, whose changes are never events
     * @param spillDirectory where streamed transactions past the memory bound are kept
     * @param slot the slot read, which names the spill files
     * @param streamMemoryBytes how many bytes of streamed transactions stay in memory, all together
     */
    public TransactionAssembler(Output output, String stateSchema, Path spillDirectory, String slot, long streamMemoryBytes) {
        this(output, (schema, table) -> schema.equals(stateSchema), spillDirectory, slot, streamMemoryBytes);
    }

    /**
     * @param stateTable whether a table ({@code schema}, {@code table}) holds walhook's state, this
     *     deployment's or another's: its changes are never events (asked at each relation message)
     */
    public TransactionAssembler(Output output, java.util.function.BiPredicate<String, String> stateTable,
            Path spillDirectory, String slot, long streamMemoryBytes) {
        this(output, stateTable, oid -> null, spillDirectory, slot, streamMemoryBytes);
    }

    /**
     * @param primaryKey the names of a table's primary key columns, by its oid (null when it has none
     *     or they cannot be read): asked at each relation message of a table with REPLICA IDENTITY
     *     FULL, whose rows' changes are then ordered by them rather than all by the table
     */
    public TransactionAssembler(Output output, java.util.function.BiPredicate<String, String> stateTable,
            java.util.function.LongFunction<List<String>> primaryKey, Path spillDirectory, String slot,
            long streamMemoryBytes) {
        this.output = output;
        this.stateTable = stateTable;
        this.primaryKey = primaryKey;
        this.spillDirectory = spillDirectory;
        this.slot = slot;
        this.streamMemoryBytes = streamMemoryBytes;
    }

    /**
     * Deletes the spill files of this slot that a stopped reader left (killed in the middle of a
     * streamed transaction, which the server sends again from its start); returns how many. Only
     * while this slot has no other reader: as a reader holding the slot's lock starts.
     */
    public int removeStaleSpills() {
        return StreamedTransaction.removeStale(spillDirectory, slot);
    }

    /** Transactions committed before {@code lsn} (a persisted or handed-on end LSN) produce nothing. */
    public void skipCommittedBefore(Lsn lsn) {
        if (lsn.compareTo(skipBefore) > 0) {
            skipBefore = lsn;
        }
    }

    /**
     * True between a Begin and its Commit, or between a Stream Start and its Stop: the server's
     * position is then inside a transaction being received. Between stream blocks it is not, though
     * streamed transactions are open: the server sends one again whole, from its first change, to
     * a reader that comes back after a position past it was acknowledged (it has not committed).
     */
    public boolean receivingTransaction() {
        return tx != null || stream != null;
    }

    /** Streamed transactions buffered, spilled or not. */
    public int openStreams() {
        return streams.size();
    }

    /** Streamed transactions that outgrew the memory bound and went to disk, since start. */
    public long spilledTransactions() {
        return spilled;
    }

    /** After the connection is replaced: the server starts over every unfinished transaction. */
    public void reset() {
        decoder.reset();
        tx = null;
        skipping = false;
        stream = null;
        streams.values().forEach(StreamedTransaction::close);
        streams.clear();
    }

    /**
     * One pgoutput message as received.
     *
     * @param message the message bytes (position to limit); not kept after the call
     * @param lsn the WAL position the server gave it (XLogData's start)
     * @throws PgOutputException if the bytes are malformed or arrive in an impossible order
     */
    public void accept(ByteBuffer message, Lsn lsn) {
        PgOutputMessage decoded = decoder.decode(message);
        if (stream != null && buffersInStream(decoded)) {
            byte[] bytes = new byte[message.remaining()];
            message.duplicate().get(bytes);
            stream.append(lsn, streamXid(decoded), bytes);
            if (decoded instanceof PgOutputMessage.Relation relation) {
                stream.relationArrived(relation.relationId(), ++relationMessages);
            }
            if (!stream.spilled() && streamedMemory() > streamMemoryBytes) {
                stream.spill();
                spilled++;
            }
            return;
        }
        handle(decoded, lsn);
    }

    private long streamedMemory() {
        long total = 0;
        for (StreamedTransaction s : streams.values()) {
            total += s.memoryBytes();
        }
        return total;
    }

    /** Inside a stream block everything but the block's own framing belongs to the streamed transaction. */
    private static boolean buffersInStream(PgOutputMessage m) {
        return switch (m.messageType()) {
            case RELATION, TYPE, INSERT, UPDATE, DELETE, TRUNCATE -> true;
            case MESSAGE -> ((PgOutputMessage.LogicalMessage) m).transactional();
            default -> false;
        };
    }

    private static long streamXid(PgOutputMessage m) {
        Long xid = switch (m.messageType()) {
            case RELATION -> ((PgOutputMessage.Relation) m).xid();
            case TYPE -> ((PgOutputMessage.Type) m).xid();
            case INSERT -> ((PgOutputMessage.Insert) m).xid();
            case UPDATE -> ((PgOutputMessage.Update) m).xid();
            case DELETE -> ((PgOutputMessage.Delete) m).xid();
            case TRUNCATE -> ((PgOutputMessage.Truncate) m).xid();
            case MESSAGE -> ((PgOutputMessage.LogicalMessage) m).xid();
            default -> null;
        };
        return xid == null ? 0 : xid;
    }

    private void handle(PgOutputMessage m, Lsn lsn) {
        switch (m.messageType()) {
            case BEGIN -> {
                PgOutputMessage.Begin begin = (PgOutputMessage.Begin) m;
                if (tx != null) {
                    throw protocol("Begin of xid " + Long.toUnsignedString(begin.xid()) + " inside transaction "
                            + Long.toUnsignedString(tx.xid()));
                }
                startTransaction(new TxInfo(begin.xid(), begin.finalLsn(), begin.commitTime()));
            }
            case COMMIT -> {
                PgOutputMessage.Commit commit = (PgOutputMessage.Commit) m;
                if (tx == null || !commit.commitLsn().equals(tx.commitLsn())) {
                    throw protocol("Commit at " + commit.commitLsn() + " without its Begin");
                }
                finishTransaction(commit.endLsn());
            }
            case ORIGIN -> {
                // the origin of a replicated transaction: nothing to deliver
            }
            case RELATION -> relation((PgOutputMessage.Relation) m);
            case TYPE -> {
                PgOutputMessage.Type type = (PgOutputMessage.Type) m;
                types.put(type.typeOid(), type);
            }
            case INSERT, UPDATE, DELETE, TRUNCATE -> change(m, lsn);
            case MESSAGE -> message((PgOutputMessage.LogicalMessage) m, lsn);
            case STREAM_START -> {
                PgOutputMessage.StreamStart start = (PgOutputMessage.StreamStart) m;
                if (tx != null) {
                    // the server streams a block while it decodes, never while it sends a transaction at its commit
                    throw protocol("Stream Start of xid " + Long.toUnsignedString(start.xid()) + " inside transaction "
                            + Long.toUnsignedString(tx.xid()));
                }
                StreamedTransaction existing = streams.get(start.xid());
                if (start.firstSegment() || existing == null) {
                    if (!start.firstSegment()) {
                        throw protocol("Stream Start of xid " + Long.toUnsignedString(start.xid())
                                + " continues a streamed transaction never started");
                    }
                    if (existing != null) {
                        existing.close(); // restarted from its first segment: drop the partial copy
                    }
                    existing = new StreamedTransaction(start.xid(), spillDirectory, slot, spillFiles);
                    streams.put(start.xid(), existing);
                }
                stream = existing;
            }
            case STREAM_STOP -> stream = null;
            case STREAM_COMMIT -> streamCommit((PgOutputMessage.StreamCommit) m);
            case STREAM_ABORT -> {
                PgOutputMessage.StreamAbort abort = (PgOutputMessage.StreamAbort) m;
                if (tx != null) {
                    throw protocol("Stream Abort of xid " + Long.toUnsignedString(abort.xid()) + " inside transaction "
                            + Long.toUnsignedString(tx.xid()));
                }
                StreamedTransaction aborted = streams.get(abort.xid());
                if (aborted != null) {
                    if (abort.subXid() == abort.xid()) {
                        streams.remove(abort.xid()).close();
                    } else {
                        aborted.abortSubTransaction(abort.subXid());
                    }
                }
                // an abort of a transaction never streamed to us (e.g. before a restart) drops nothing
            }
            case BEGIN_PREPARE, PREPARE, COMMIT_PREPARED, ROLLBACK_PREPARED, STREAM_PREPARE -> throw protocol(
                    m.messageType() + " received: walhook's replication does not enable two_phase; is another"
                            + " client's option on this slot?");
        }
    }

    private void startTransaction(TxInfo info) {
        tx = info;
        seq = 0;
        skipping = delivered(info.commitLsn());
        if (!skipping) {
            output.begin(info);
        }
    }

    /** Whether the transaction committed there was handed on before the stream resumed ({@code skipBefore}). */
    private boolean delivered(Lsn commitLsn) {
        return skipBefore.isValid() && commitLsn.compareTo(skipBefore) < 0;
    }

    private void finishTransaction(Lsn endLsn) {
        if (!skipping) {
            output.commit(tx, endLsn, seq);
        }
        tx = null;
        skipping = false;
    }

    private void streamCommit(PgOutputMessage.StreamCommit commit) {
        if (tx != null) {
            // before it is taken out of the streams: the reset after this refusal closes it, spill file and all
            throw protocol("Stream Commit of xid " + Long.toUnsignedString(commit.xid()) + " inside a transaction");
        }
        StreamedTransaction committed = streams.remove(commit.xid());
        if (committed == null && !delivered(commit.commitLsn())) {
            // its changes came in blocks that were not kept (a Stream Start missed, or the copy dropped): committing it
            // empty would acknowledge them lost; a reconnect has the server stream it again from its first block
            throw protocol("Stream Commit of xid " + Long.toUnsignedString(commit.xid()) + " whose changes were never"
                    + " streamed");
        }
        startTransaction(new TxInfo(commit.xid(), commit.commitLsn(), commit.commitTime()));
        if (committed != null) {
            try (committed) {
                replayedRelations = new HashMap<>();
                lastRelation = null;
                PgOutputDecoder replay = new PgOutputDecoder();
                replay.decode(ByteBuffer.wrap(streamStart(commit.xid())));
                boolean handedOn = skipping; // already handed on: its relations still matter for what follows
                int[] replayed = {0};
                committed.replay(record -> {
                    if (++replayed[0] % REPLAYED_BETWEEN_CALLS == 0) {
                        output.working();
                    }
                    PgOutputMessage m = replay.decode(ByteBuffer.wrap(record.bytes()));
                    if (!handedOn || m.messageType() == io.walhook.pgoutput.MessageType.RELATION
                            || m.messageType() == io.walhook.pgoutput.MessageType.TYPE) {
                        handle(m, record.lsn());
                    }
                });
                replayedRelations.forEach((oid, info) -> {
                    long arrival = committed.relationArrival(oid);
                    if (arrival > relationArrivals.getOrDefault(oid, 0L)) {
                        relations.put(oid, info);
                        relationArrivals.put(oid, arrival);
                    }
                });
            } finally {
                replayedRelations = null;
                lastRelation = null;
            }
        }
        finishTransaction(commit.endLsn());
    }

    private static byte[] streamStart(long xid) {
        return new byte[] {'S', (byte) (xid >>> 24), (byte) (xid >>> 16), (byte) (xid >>> 8), (byte) xid, 1};
    }

    private void relation(PgOutputMessage.Relation relation) {
        List<PgOutputMessage.Relation.Column> columns = relation.columns();
        ValueConverter[] converters = new ValueConverter[columns.size()];
        for (int i = 0; i < converters.length; i++) {
            converters[i] = valueConverters.forColumn(columns.get(i), types::get);
        }
        boolean routed = !stateTable.test(relation.effectiveNamespace(), relation.relationName());
        RelationInfo info = new RelationInfo(relation, converters, routed,
                relation.replicaIdentity() == io.walhook.pgoutput.ReplicaIdentity.FULL && routed
                        ? primaryKey.apply(relation.relationId()) : null);
        if (replayedRelations != null) {
            replayedRelations.put(relation.relationId(), info);
        } else {
            relations.put(relation.relationId(), info);
            relationArrivals.put(relation.relationId(), ++relationMessages);
        }
        lastRelation = null;
    }

    private RelationInfo relationFor(long oid, PgOutputMessage m) {
        RelationInfo last = lastRelation;
        if (last != null && last.oid() == oid) {
            return last; // runs of changes to one table: no boxed key, no map lookup
        }
        RelationInfo info = replayedRelations == null ? null : replayedRelations.get(oid);
        if (info == null) {
            info = relations.get(oid);
        }
        if (info == null) {
            throw protocol(m.messageType() + " for relation " + Long.toUnsignedString(oid) + " before its Relation message");
        }
        lastRelation = info;
        return info;
    }

    private void change(PgOutputMessage m, Lsn lsn) {
        if (tx == null) {
            throw protocol(m.messageType() + " outside a transaction");
        }
        switch (m.messageType()) {
            case INSERT -> {
                PgOutputMessage.Insert insert = (PgOutputMessage.Insert) m;
                RelationInfo relation = checked(relationFor(insert.relationId(), m), insert.newTuple());
                if (!skipping && relation.routed()) {
                    emit(ChangeEvent.row(Operation.INSERT, relation, null, null, insert.newTuple().detach(), lsn, tx,
                            ++seq));
                }
            }
            case UPDATE -> {
                PgOutputMessage.Update update = (PgOutputMessage.Update) m;
                RelationInfo relation = checked(relationFor(update.relationId(), m), update.newTuple());
                checked(relation, update.keyTuple()); // the key is hashed by the Relation's columns
                checked(relation, update.oldTuple());
                if (!skipping && relation.routed()) {
                    emit(ChangeEvent.row(Operation.UPDATE, relation, detach(update.keyTuple()),
                            detach(update.oldTuple()), update.newTuple().detach(), lsn, tx, ++seq));
                }
            }
            case DELETE -> {
                PgOutputMessage.Delete delete = (PgOutputMessage.Delete) m;
                RelationInfo relation = relationFor(delete.relationId(), m);
                checked(relation, delete.keyTuple() != null ? delete.keyTuple() : delete.oldTuple());
                if (!skipping && relation.routed()) {
                    emit(ChangeEvent.row(Operation.DELETE, relation, detach(delete.keyTuple()),
                            detach(delete.oldTuple()), null, lsn, tx, ++seq));
                }
            }
            case TRUNCATE -> {
                PgOutputMessage.Truncate truncate = (PgOutputMessage.Truncate) m;
                for (long oid : truncate.relationIds()) {
                    RelationInfo relation = relationFor(oid, m);
                    if (!skipping && relation.routed()) {
                        emit(ChangeEvent.truncate(relation, truncate.cascade(), truncate.restartIdentity(), lsn, tx,
                                ++seq));
                    }
                }
            }
            default -> throw new IllegalStateException("not a change: " + m.messageType());
        }
    }

    private RelationInfo checked(RelationInfo relation, TupleData tuple) {
        if (tuple != null && tuple.size() != relation.columnCount()) {
            throw protocol("tuple of " + tuple.size() + " columns for " + relation + " whose Relation has "
                    + relation.columnCount());
        }
        return relation;
    }

    private static TupleData detach(TupleData tuple) {
        return tuple == null ? null : tuple.detach();
    }

    private void message(PgOutputMessage.LogicalMessage message, Lsn lsn) {
        if (message.transactional()) {
            if (tx == null) {
                throw protocol("transactional Message outside a transaction");
            }
            if (!skipping) {
                emit(ChangeEvent.message(message.prefix(), message.contentBytes(), true, message.lsn(), tx, ++seq));
            }
            return;
        }
        if (tx != null) {
            // the server sends one as its record is decoded, never while it sends a transaction at its commit: taken
            // here, it would have begun and committed inside that one's delivery
            throw protocol("non-transactional Message inside transaction " + Long.toUnsignedString(tx.xid()));
        }
        // Non-transactional: delivered on its own, at its own position. That is the end of its WAL
        // record (the server gives a message the end position), where the next record starts: often
        // the commit record of the transaction the message was emitted in, which arrives after it.
        // Acknowledged there and no further, so that transaction is not skipped after a restart
        // (the server skips transactions whose commit record starts before the start position).
        if (skipBefore.isValid() && message.lsn().compareTo(skipBefore) <= 0) {
            return;
        }
        TxInfo own = new TxInfo(0, message.lsn(), null);
        output.begin(own);
        output.event(ChangeEvent.message(message.prefix(), message.contentBytes(), false, message.lsn(), own, 0));
        output.commit(own, message.lsn(), 1);
    }

    private void emit(ChangeEvent event) {
        output.event(event);
    }

    private static PgOutputException protocol(String detail) {
        return new PgOutputException('?', 0, detail);
    }
}
