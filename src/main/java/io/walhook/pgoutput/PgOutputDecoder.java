package io.walhook.pgoutput;

import io.walhook.pgoutput.PgOutputMessage.Begin;
import io.walhook.pgoutput.PgOutputMessage.BeginPrepare;
import io.walhook.pgoutput.PgOutputMessage.Commit;
import io.walhook.pgoutput.PgOutputMessage.CommitPrepared;
import io.walhook.pgoutput.PgOutputMessage.Delete;
import io.walhook.pgoutput.PgOutputMessage.Insert;
import io.walhook.pgoutput.PgOutputMessage.LogicalMessage;
import io.walhook.pgoutput.PgOutputMessage.Origin;
import io.walhook.pgoutput.PgOutputMessage.Prepare;
import io.walhook.pgoutput.PgOutputMessage.Relation;
import io.walhook.pgoutput.PgOutputMessage.RollbackPrepared;
import io.walhook.pgoutput.PgOutputMessage.StreamAbort;
import io.walhook.pgoutput.PgOutputMessage.StreamCommit;
import io.walhook.pgoutput.PgOutputMessage.StreamPrepare;
import io.walhook.pgoutput.PgOutputMessage.StreamStart;
import io.walhook.pgoutput.PgOutputMessage.StreamStop;
import io.walhook.pgoutput.PgOutputMessage.Truncate;
import io.walhook.pgoutput.PgOutputMessage.Type;
import io.walhook.pgoutput.PgOutputMessage.Update;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Decodes pgoutput messages (protocol versions 1 to 4, PostgreSQL 14 to 18) into
 * {@link PgOutputMessage} records.
 *
 * <p><b>State.</b> The protocol is stateful in one respect: "Xid of the transaction (only present for
 * streamed transactions)" prefixes Relation, Type, Insert, Update, Delete, Truncate and Message
 * exactly between a Stream Start and the next Stream Stop. This decoder tracks that; feed it every
 * message of one replication connection in order, and {@link #reset()} it when the connection is
 * replaced. A Stream Start inside a stream block and a Stream Stop outside one are errors. Not
 * thread-safe.
 *
 * <p>Apart from the stream state, decoding does not depend on the negotiated protocol version: the
 * only variable layout, Stream Abort, is told apart by its length (8 bytes of xid and subxid, or 24
 * with the abort LSN and time of {@code streaming = parallel}).
 *
 * <p><b>Bad input.</b> Every read is checked against the bytes left. Truncation, an unknown message
 * type, tuple kind or replica identity, flags the protocol does not define (non-zero where "currently
 * unused"), a length or count larger than the bytes left, an unterminated string and trailing bytes
 * all throw one {@link PgOutputException} naming the message type, the offset and the problem; the
 * stream state is left as it was. No allocation is sized by a count before the count is checked
 * against the bytes left, and all work is bounded by the message length.
 *
 * <p><b>Zero copy.</b> {@link TupleData} and {@link LogicalMessage#content()} refer to the message
 * buffer; see {@link TupleData} for how long they are valid. Strings are decoded as UTF-8, the
 * walsender's {@code client_encoding} for pgjdbc.
 *
 * @see <a href="https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html">Logical
 *     Replication Message Formats</a>
 */
public final class PgOutputDecoder {

    /** Minimum bytes of one Relation column: flags, an empty name's NUL, type OID, type modifier. */
    private static final int MIN_RELATION_COLUMN_BYTES = 1 + 1 + 4 + 4;

    private boolean inStream;

    /**
     * Decodes one message.
     *
     * @param message from its position (the type byte) to its limit: exactly one message, such as the
     *     payload of an XLogData frame or a row of {@code pg_logical_slot_peek_binary_changes}; its
     *     position and limit are not changed
     * @return the message, never {@code null}
     * @throws PgOutputException if the bytes are not one well-formed message in the current state
     */
    public PgOutputMessage decode(ByteBuffer message) {
        MessageReader r = new MessageReader(message);
        if (r.remaining() == 0) {
            throw r.error("empty message");
        }
        char type = r.type();
        if (inStream && (type == 'B' || type == 'c' || type == 'A')) {
            // the server ends a stream block before it sends another transaction or a streamed one's end: one
            // taken inside a block would have the block's next changes join a transaction already ended
            throw r.errorAt(0, (type == 'B' ? "Begin" : type == 'c' ? "Stream Commit" : "Stream Abort")
                    + " inside a stream block (no Stream Stop since the last Stream Start)");
        }
        PgOutputMessage decoded = switch (type) {
            case 'B' -> new Begin(r.lsn("final_lsn"), r.time("commit_ts"), r.u32("xid"));
            case 'C' -> new Commit(r.zeroFlags("flags"), r.lsn("commit_lsn"), r.lsn("end_lsn"), r.time("commit_ts"));
            case 'O' -> new Origin(r.lsn("origin commit_lsn"), r.string("origin name"));
            case 'R' -> relation(r);
            case 'Y' -> new Type(streamXid(r), r.u32("type OID"), r.string("namespace"), r.string("type name"));
            case 'I' -> insert(r);
            case 'U' -> update(r);
            case 'D' -> delete(r);
            case 'T' -> truncate(r);
            case 'M' -> logicalMessage(r);
            case 'S' -> streamStart(r);
            case 'E' -> streamStop(r);
            case 'c' -> new StreamCommit(r.u32("xid"), r.zeroFlags("flags"), r.lsn("commit_lsn"), r.lsn("end_lsn"),
                    r.time("commit_ts"));
            case 'A' -> streamAbort(r);
            case 'b' -> new BeginPrepare(r.lsn("prepare_lsn"), r.lsn("end_lsn"), r.time("prepare_ts"), r.u32("xid"),
                    r.string("gid"));
            case 'P' -> new Prepare(r.zeroFlags("flags"), r.lsn("prepare_lsn"), r.lsn("end_lsn"), r.time("prepare_ts"),
                    r.u32("xid"), r.string("gid"));
            case 'K' -> new CommitPrepared(r.zeroFlags("flags"), r.lsn("commit_lsn"), r.lsn("end_lsn"),
                    r.time("commit_ts"), r.u32("xid"), r.string("gid"));
            case 'r' -> new RollbackPrepared(r.zeroFlags("flags"), r.lsn("prepare_end_lsn"), r.lsn("rollback_end_lsn"),
                    r.time("prepare_ts"), r.time("rollback_ts"), r.u32("xid"), r.string("gid"));
            case 'p' -> new StreamPrepare(r.zeroFlags("flags"), r.lsn("prepare_lsn"), r.lsn("end_lsn"),
                    r.time("prepare_ts"), r.u32("xid"), r.string("gid"));
            default -> throw r.errorAt(0, "unknown message type");
        };
        r.end();
        if (decoded instanceof StreamStart) {
            inStream = true;
        } else if (decoded instanceof StreamStop) {
            inStream = false;
        }
        return decoded;
    }

    /** Decodes one message held in a whole array; see {@link #decode(ByteBuffer)}. */
    public PgOutputMessage decode(byte[] message) {
        return decode(ByteBuffer.wrap(message));
    }

    /** Whether the last message decoded left a stream block open (a Stream Start without its Stream Stop). */
    public boolean inStream() {
        return inStream;
    }

    /** Forgets the stream state, for a new replication connection. */
    public void reset() {
        inStream = false;
    }

    private Long streamXid(MessageReader r) {
        return inStream ? r.u32("xid") : null;
    }

    private Relation relation(MessageReader r) {
        Long xid = streamXid(r);
        long relationId = r.u32("relation OID");
        String namespace = r.string("namespace");
        String name = r.string("relation name");
        int identityAt = r.offset();
        int identityCode = r.u8("replica identity");
        ReplicaIdentity identity = ReplicaIdentity.fromCode(identityCode);
        if (identity == null) {
            throw r.errorAt(identityAt, "unknown replica identity " + MessageReader.describe(identityCode));
        }
        int countAt = r.offset();
        int count = r.u16("column count");
        r.checkCount(count, MIN_RELATION_COLUMN_BYTES, countAt, "column count");
        Relation.Column[] columns = new Relation.Column[count];
        for (int i = 0; i < count; i++) {
            int flagsAt = r.offset();
            int flags = r.u8("column flags");
            if (flags > 1) {
                throw r.errorAt(flagsAt, "column " + i + ": flags must be 0 or 1, got " + flags);
            }
            String columnName = r.string("column name");
            long typeOid = r.u32("column type OID");
            int typeModifier = r.i32("column type modifier");
            columns[i] = new Relation.Column(flags == 1, columnName, typeOid, typeModifier);
        }
        return new Relation(xid, relationId, namespace, name, identity, Arrays.asList(columns));
    }

    private Insert insert(MessageReader r) {
        Long xid = streamXid(r);
        long relationId = r.u32("relation OID");
        expectMarker(r, 'N');
        return new Insert(xid, relationId, tuple(r, 'N'));
    }

    private Update update(MessageReader r) {
        Long xid = streamXid(r);
        long relationId = r.u32("relation OID");
        int markerAt = r.offset();
        int marker = r.u8("tuple marker");
        TupleData key = null;
        TupleData old = null;
        if (marker == 'K' || marker == 'O') {
            TupleData oldImage = tuple(r, (char) marker);
            if (marker == 'K') {
                key = oldImage;
            } else {
                old = oldImage;
            }
            expectMarker(r, 'N');
        } else if (marker != 'N') {
            throw r.errorAt(markerAt, "expected tuple marker 'K', 'O' or 'N', got " + MessageReader.describe(marker));
        }
        return new Update(xid, relationId, key, old, tuple(r, 'N'));
    }

    private Delete delete(MessageReader r) {
        Long xid = streamXid(r);
        long relationId = r.u32("relation OID");
        int markerAt = r.offset();
        int marker = r.u8("tuple marker");
        return switch (marker) {
            case 'K' -> new Delete(xid, relationId, tuple(r, 'K'), null);
            case 'O' -> new Delete(xid, relationId, null, tuple(r, 'O'));
            default -> throw r.errorAt(markerAt, "expected tuple marker 'K' or 'O', got " + MessageReader.describe(marker));
        };
    }

    private static void expectMarker(MessageReader r, char expected) {
        int at = r.offset();
        int marker = r.u8("tuple marker");
        if (marker != expected) {
            throw r.errorAt(at, "expected tuple marker '" + expected + "', got " + MessageReader.describe(marker));
        }
    }

    private static TupleData tuple(MessageReader r, char marker) {
        // the names only serve error messages: none is built per tuple or column while the bytes are sound
        String which = switch (marker) {
            case 'K' -> "'K' tuple";
            case 'O' -> "'O' tuple";
            case 'N' -> "'N' tuple";
            default -> "'" + marker + "' tuple";
        };
        String countName = switch (marker) {
            case 'K' -> "'K' tuple column count";
            case 'O' -> "'O' tuple column count";
            case 'N' -> "'N' tuple column count";
            default -> which + " column count";
        };
        int countAt = r.offset();
        int count = r.u16(countName);
        // Every column takes at least its kind byte.
        r.checkCount(count, 1, countAt, countName);
        byte[] kinds = new byte[count];
        int[] offsets = new int[count];
        int[] lengths = new int[count];
        for (int i = 0; i < count; i++) {
            int kindAt = r.offset();
            int kind = r.remaining() > 0 ? r.u8(which) : r.u8(which + " column kind"); // the latter fails
            switch (kind) {
                case 'n', 'u' -> offsets[i] = r.position();
                case 't', 'b' -> {
                    int length = r.columnLength(which, i);
                    offsets[i] = r.position();
                    lengths[i] = length;
                    r.skip(length);
                }
                default -> throw r.errorAt(kindAt,
                        which + " column " + i + ": unknown kind " + MessageReader.describe(kind));
            }
            kinds[i] = (byte) kind;
        }
        return new TupleData(r.buffer, kinds, offsets, lengths, false);
    }

    private Truncate truncate(MessageReader r) {
        Long xid = streamXid(r);
        int countAt = r.offset();
        long count = r.u32("relation count");
        int optionsAt = r.offset();
        int options = r.u8("option bits");
        if ((options & ~3) != 0) {
            throw r.errorAt(optionsAt, "unknown option bits " + options + " (1 = CASCADE, 2 = RESTART IDENTITY)");
        }
        r.checkCount(count, 4, countAt, "relation count");
        List<Long> relationIds = new ArrayList<>((int) count);
        for (long i = 0; i < count; i++) {
            relationIds.add(r.u32("relation OID"));
        }
        return new Truncate(xid, relationIds, (options & 1) != 0, (options & 2) != 0);
    }

    private LogicalMessage logicalMessage(MessageReader r) {
        Long xid = streamXid(r);
        boolean transactional = r.bool("flags");
        Lsn lsn = r.lsn("lsn");
        String prefix = r.string("prefix");
        int length = r.length("content");
        return new LogicalMessage(xid, transactional, lsn, prefix, r.slice(length));
    }

    private StreamStart streamStart(MessageReader r) {
        if (inStream) {
            throw r.errorAt(0, "Stream Start inside a stream block (no Stream Stop since the last Stream Start)");
        }
        return new StreamStart(r.u32("xid"), r.bool("first_segment"));
    }

    private StreamStop streamStop(MessageReader r) {
        if (!inStream) {
            throw r.errorAt(0, "Stream Stop outside a stream block");
        }
        return new StreamStop();
    }

    private static StreamAbort streamAbort(MessageReader r) {
        int body = r.remaining();
        if (body != 8 && body != 24) {
            throw r.error("Stream Abort body is " + body + " bytes; expected 8 (xid, subxid) or 24 (with abort_lsn and"
                    + " abort_ts, streaming = parallel)");
        }
        long xid = r.u32("xid");
        long subXid = r.u32("subxid");
        if (body == 8) {
            return new StreamAbort(xid, subXid, null, null);
        }
        Lsn abortLsn = r.lsn("abort_lsn");
        Instant abortTime = r.time("abort_ts");
        return new StreamAbort(xid, subXid, abortLsn, abortTime);
    }
}
