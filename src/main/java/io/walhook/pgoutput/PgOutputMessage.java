package io.walhook.pgoutput;

import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.List;
import java.util.Objects;

/**
 * One message of PostgreSQL's logical replication protocol as sent by the {@code pgoutput} plugin,
 * one record per message type, with PostgreSQL's own field names.
 *
 * <p>Java types: positions are {@link Lsn}; timestamps are {@link Instant}s at microsecond precision;
 * transaction ids and OIDs are unsigned 32-bit values on the wire and are held in a {@code long}
 * (an OID of 4294967280 stays 4294967280, never negative).
 *
 * <p><b>The {@code [xid]} prefix.</b> The manual: "Xid of the transaction (only present for streamed
 * transactions). This field is available since protocol version 2." It is present on Relation, Type,
 * Insert, Update, Delete, Truncate and Message exactly when the message is sent between a Stream
 * Start and its Stream Stop; there it is the xid of the (sub)transaction that made the change. Those
 * records hold it as a {@link Long} that is {@code null} outside stream blocks.
 *
 * <p><b>Protocol versions.</b> Version 1 (PostgreSQL 10): Begin, Commit, Origin, Relation, Type,
 * Insert, Update, Delete, Truncate (11). Message ({@code messages} option, 14). Version 2 (14,
 * {@code streaming}): Stream Start/Stop/Commit/Abort. Version 3 (15, {@code two_phase}): Begin
 * Prepare, Prepare, Commit Prepared, Rollback Prepared, Stream Prepare. Version 4 (16,
 * {@code streaming=parallel}): Stream Abort gains abort LSN and time.
 *
 * <p>Switch over {@link #messageType()} (or, from Java 21, over this sealed interface) without a
 * {@code default} branch, so that a new message type breaks the build where it is not handled.
 *
 * @see <a href="https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html">Logical
 *     Replication Message Formats</a>
 * @see <a href="https://www.postgresql.org/docs/current/protocol-logical-replication.html">Logical Streaming
 *     Replication Protocol</a>
 */
public sealed interface PgOutputMessage {

    /** The schema name PostgreSQL leaves out (sends as "") in Relation and Type messages. */
    String PG_CATALOG = "pg_catalog";

    /** The message's type, to switch over exhaustively (Java 17 has no pattern switch over sealed types). */
    MessageType messageType();

    /**
     * {@code 'B'}: a transaction starts.
     *
     * @param finalLsn "The final LSN of the transaction": the start of its commit record, the same
     *     as {@link Commit#commitLsn()}
     * @param commitTime the commit timestamp (with an origin: the origin's commit timestamp)
     * @param xid the transaction id
     */
    record Begin(Lsn finalLsn, Instant commitTime, long xid) implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.BEGIN;
        }
    }

    /**
     * {@code 'C'}: the transaction commits.
     *
     * @param flags "currently unused", always 0
     * @param commitLsn the start of the commit record
     * @param endLsn the end of the commit record: the position to acknowledge once the transaction is
     *     durable downstream
     */
    record Commit(byte flags, Lsn commitLsn, Lsn endLsn, Instant commitTime) implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.COMMIT;
        }
    }

    /**
     * {@code 'O'}: the transaction came from another node through replication origin
     * {@code originName}; sent after Begin, only with {@code origin = any} (the default).
     */
    record Origin(Lsn originCommitLsn, String originName) implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.ORIGIN;
        }
    }

    /**
     * {@code 'R'}: the description of a table, sent before its first change in the session and again
     * after any change to it (even in the middle of a transaction). Later changes of the table carry
     * their columns in this order.
     *
     * @param xid the streamed (sub)transaction, or {@code null} outside a stream block
     * @param relationId the table's OID (unsigned)
     * @param namespace the schema, "" for {@code pg_catalog}; see {@link #effectiveNamespace()}
     * @param columns the published columns in the order of the tuples
     */
    record Relation(Long xid, long relationId, String namespace, String relationName, ReplicaIdentity replicaIdentity,
            List<Column> columns) implements PgOutputMessage {

        public Relation {
            Objects.requireNonNull(namespace, "namespace");
            Objects.requireNonNull(relationName, "relationName");
            Objects.requireNonNull(replicaIdentity, "replicaIdentity");
            columns = List.copyOf(columns);
        }

        @Override
        public MessageType messageType() {
            return MessageType.RELATION;
        }

        /** The schema with the manual's rule applied: "" means {@code pg_catalog}. */
        public String effectiveNamespace() {
            return namespace.isEmpty() ? PG_CATALOG : namespace;
        }

        /**
         * One column of a Relation.
         *
         * @param key flags bit 1: "Flags for the column. Currently can be either 0 for no flags or 1
         *     which marks the column as part of the key." Under REPLICA IDENTITY FULL every column is
         *     marked.
         * @param typeOid the OID of the column's type (unsigned); for a domain, the domain's own OID (its
         *     {@link Type} message names the base type)
         * @param typeModifier {@code atttypmod}, -1 when the type has none
         */
        public record Column(boolean key, String name, long typeOid, int typeModifier) {
            public Column {
                Objects.requireNonNull(name, "name");
            }
        }
    }

    /**
     * {@code 'Y'}: a user-defined type (OID of 10000 or more) used by a following Relation. For a
     * domain: the domain's OID with its base type's schema and name ({@code int4} in {@code ""}).
     *
     * @param xid the streamed (sub)transaction, or {@code null} outside a stream block
     * @param namespace the schema, "" for {@code pg_catalog}; see {@link #effectiveNamespace()}
     */
    record Type(Long xid, long typeOid, String namespace, String typeName) implements PgOutputMessage {

        public Type {
            Objects.requireNonNull(namespace, "namespace");
            Objects.requireNonNull(typeName, "typeName");
        }

        @Override
        public MessageType messageType() {
            return MessageType.TYPE;
        }

        /** The schema with the manual's rule applied: "" means {@code pg_catalog}. */
        public String effectiveNamespace() {
            return namespace.isEmpty() ? PG_CATALOG : namespace;
        }
    }

    /**
     * {@code 'I'}: a row was inserted; {@code newTuple} came after the marker {@code 'N'}.
     *
     * @param xid the streamed (sub)transaction, or {@code null} outside a stream block
     */
    record Insert(Long xid, long relationId, TupleData newTuple) implements PgOutputMessage {

        public Insert {
            Objects.requireNonNull(newTuple, "newTuple");
        }

        @Override
        public MessageType messageType() {
            return MessageType.INSERT;
        }
    }

    /**
     * {@code 'U'}: a row was updated. At most one of the old images is present: {@code 'K'} (the
     * replica identity key; non-key columns are sent as {@code 'n'}) when the table's identity is
     * DEFAULT or INDEX and a key column changed or is stored externally, {@code 'O'} (the whole old
     * row) under REPLICA IDENTITY FULL, neither otherwise. The new tuple may hold {@code 'u'} for
     * unchanged TOASTed columns.
     *
     * @param xid the streamed (sub)transaction, or {@code null} outside a stream block
     * @param keyTuple the {@code 'K'} tuple or {@code null}
     * @param oldTuple the {@code 'O'} tuple or {@code null}
     * @param newTuple the {@code 'N'} tuple
     */
    record Update(Long xid, long relationId, TupleData keyTuple, TupleData oldTuple, TupleData newTuple)
            implements PgOutputMessage {

        public Update {
            Objects.requireNonNull(newTuple, "newTuple");
            if (keyTuple != null && oldTuple != null) {
                throw new IllegalArgumentException("an Update has a 'K' or an 'O' tuple, not both");
            }
        }

        @Override
        public MessageType messageType() {
            return MessageType.UPDATE;
        }
    }

    /**
     * {@code 'D'}: a row was deleted. Exactly one of {@code keyTuple} ({@code 'K'}: REPLICA IDENTITY
     * DEFAULT or INDEX, non-key columns as {@code 'n'}) and {@code oldTuple} ({@code 'O'}: FULL) is
     * present.
     *
     * @param xid the streamed (sub)transaction, or {@code null} outside a stream block
     */
    record Delete(Long xid, long relationId, TupleData keyTuple, TupleData oldTuple) implements PgOutputMessage {

        public Delete {
            if ((keyTuple == null) == (oldTuple == null)) {
                throw new IllegalArgumentException("a Delete has exactly one of a 'K' and an 'O' tuple");
            }
        }

        @Override
        public MessageType messageType() {
            return MessageType.DELETE;
        }
    }

    /**
     * {@code 'T'}: tables were truncated by one statement. Option bits: "1 for CASCADE, 2 for
     * RESTART IDENTITY".
     *
     * @param xid the streamed (sub)transaction, or {@code null} outside a stream block
     * @param relationIds the OIDs (unsigned) of the published tables truncated
     */
    record Truncate(Long xid, List<Long> relationIds, boolean cascade, boolean restartIdentity)
            implements PgOutputMessage {

        public Truncate {
            relationIds = List.copyOf(relationIds);
        }

        @Override
        public MessageType messageType() {
            return MessageType.TRUNCATE;
        }
    }

    /**
     * {@code 'M'}: a message from {@code pg_logical_emit_message} (option {@code messages}, PostgreSQL
     * 14). A non-transactional message is sent at once, even when its transaction later rolls back.
     *
     * <p>{@code content} is a view of the message buffer, like {@link TupleData}: valid as long as the
     * message bytes are; {@link #detach()} copies it. The bytes are arbitrary, not necessarily text.
     *
     * @param xid the streamed (sub)transaction, or {@code null} outside a stream block
     * @param transactional flags bit 1: "Either 0 for no flags or 1 if the logical decoding message is
     *     transactional"
     * @param lsn the LSN of the message
     * @param content the message content; the accessor returns a fresh read-only view each time
     */
    record LogicalMessage(Long xid, boolean transactional, Lsn lsn, String prefix, ByteBuffer content)
            implements PgOutputMessage {

        public LogicalMessage {
            Objects.requireNonNull(prefix, "prefix");
            content = content.slice().asReadOnlyBuffer();
        }

        @Override
        public MessageType messageType() {
            return MessageType.MESSAGE;
        }

        /** The content as a read-only buffer, position 0, limit its length; each call gives a new view. */
        @Override
        public ByteBuffer content() {
            return content.duplicate();
        }

        /** A copy of the content. */
        public byte[] contentBytes() {
            byte[] copy = new byte[content.remaining()];
            content.get(0, copy);
            return copy;
        }

        /** The length of the content in bytes. */
        public int contentLength() {
            return content.remaining();
        }

        /** An equal message that owns a copy of its content, independent of the message buffer. */
        public LogicalMessage detach() {
            return new LogicalMessage(xid, transactional, lsn, prefix, ByteBuffer.wrap(contentBytes()));
        }

        /** Without the content, which may be personal data. */
        @Override
        public String toString() {
            return "LogicalMessage[xid=" + xid + ", transactional=" + transactional + ", lsn=" + lsn + ", prefix="
                    + prefix + ", content=" + content.remaining() + " bytes]";
        }
    }

    /**
     * {@code 'S'}: a block of changes of the large in-progress transaction {@code xid} starts
     * (protocol 2, option {@code streaming}). Relation, Type, Insert, Update, Delete, Truncate and
     * Message carry an {@code [xid]} until the matching {@link StreamStop}. Blocks of several
     * transactions interleave with ordinary transactions.
     *
     * @param firstSegment "A value of 1 indicates this is the first stream segment for this XID, 0
     *     for any other stream segment." After a reconnect a transaction starts over with 1.
     */
    record StreamStart(long xid, boolean firstSegment) implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.STREAM_START;
        }
    }

    /** {@code 'E'}: the current stream block ends. */
    record StreamStop() implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.STREAM_STOP;
        }
    }

    /**
     * {@code 'c'}: the streamed transaction {@code xid} commits; sent outside a stream block.
     *
     * @param flags "currently unused", always 0
     * @param endLsn the position to acknowledge
     */
    record StreamCommit(long xid, byte flags, Lsn commitLsn, Lsn endLsn, Instant commitTime)
            implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.STREAM_COMMIT;
        }
    }

    /**
     * {@code 'A'}: the streamed transaction {@code xid} ({@code subXid == xid}) or one of its
     * subtransactions ({@code subXid != xid}, possibly one never seen) aborts.
     *
     * @param abortLsn the LSN of the abort, sent only with {@code streaming = parallel} (protocol 4,
     *     PostgreSQL 16); otherwise {@code null}
     * @param abortTime the abort timestamp, present exactly when {@code abortLsn} is
     */
    record StreamAbort(long xid, long subXid, Lsn abortLsn, Instant abortTime) implements PgOutputMessage {

        public StreamAbort {
            if ((abortLsn == null) != (abortTime == null)) {
                throw new IllegalArgumentException("abortLsn and abortTime come together");
            }
        }

        @Override
        public MessageType messageType() {
            return MessageType.STREAM_ABORT;
        }
    }

    /**
     * {@code 'b'}: a transaction being prepared for two-phase commit starts (protocol 3, option
     * {@code two_phase}).
     *
     * @param prepareLsn "The LSN of the prepare."
     * @param endLsn "The end LSN of the prepared transaction."
     * @param gid the global identifier given to {@code PREPARE TRANSACTION}
     */
    record BeginPrepare(Lsn prepareLsn, Lsn endLsn, Instant prepareTime, long xid, String gid)
            implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.BEGIN_PREPARE;
        }
    }

    /**
     * {@code 'P'}: the transaction opened by {@link BeginPrepare} is prepared.
     *
     * @param flags "currently unused", always 0
     */
    record Prepare(byte flags, Lsn prepareLsn, Lsn endLsn, Instant prepareTime, long xid, String gid)
            implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.PREPARE;
        }
    }

    /**
     * {@code 'K'}: {@code COMMIT PREPARED} of {@code gid}.
     *
     * @param flags "currently unused", always 0
     * @param endLsn the position to acknowledge
     */
    record CommitPrepared(byte flags, Lsn commitLsn, Lsn endLsn, Instant commitTime, long xid, String gid)
            implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.COMMIT_PREPARED;
        }
    }

    /**
     * {@code 'r'}: {@code ROLLBACK PREPARED} of {@code gid}, which may name a transaction never seen.
     *
     * @param flags "currently unused", always 0
     * @param prepareEndLsn "The end LSN of the prepared transaction": with {@code gid}, identifies it
     * @param rollbackEndLsn the position to acknowledge
     */
    record RollbackPrepared(byte flags, Lsn prepareEndLsn, Lsn rollbackEndLsn, Instant prepareTime,
            Instant rollbackTime, long xid, String gid) implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.ROLLBACK_PREPARED;
        }
    }

    /**
     * {@code 'p'}: a streamed transaction is prepared; same layout as {@link Prepare}, sent outside
     * stream blocks.
     *
     * @param flags "currently unused", always 0
     */
    record StreamPrepare(byte flags, Lsn prepareLsn, Lsn endLsn, Instant prepareTime, long xid, String gid)
            implements PgOutputMessage {

        @Override
        public MessageType messageType() {
            return MessageType.STREAM_PREPARE;
        }
    }
}
