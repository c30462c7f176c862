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
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Writes pgoutput messages field by field, in the layout of the manual, and pairs the bytes with the
 * record the decoder should return (like pglogrepl's {@code createRelationTestData}). The low-level
 * writer methods also serve to build malformed messages.
 */
final class PgOutputBytes {

    /** The bytes of one message and the record they stand for. */
    record Sample<M extends PgOutputMessage>(byte[] bytes, M expected) {

        /** Whether the message only decodes inside a stream block (it has an [xid], or is a Stream Stop). */
        boolean needsStream() {
            return PgOutputBytes.needsStream(expected);
        }

        /** A decoder in the stream state the message needs. */
        PgOutputDecoder decoder() {
            PgOutputDecoder decoder = new PgOutputDecoder();
            if (needsStream()) {
                enterStream(decoder);
            }
            return decoder;
        }
    }

    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    /** Starts a message with its type byte. */
    static PgOutputBytes message(char type) {
        return new PgOutputBytes().u8(type);
    }

    PgOutputBytes u8(int v) {
        out.write(v);
        return this;
    }

    PgOutputBytes u16(int v) {
        return u8(v >>> 8).u8(v);
    }

    PgOutputBytes i32(int v) {
        return u16(v >>> 16).u16(v);
    }

    PgOutputBytes u32(long v) {
        return i32((int) v);
    }

    PgOutputBytes i64(long v) {
        return i32((int) (v >>> 32)).i32((int) v);
    }

    PgOutputBytes lsn(Lsn lsn) {
        return i64(lsn.value());
    }

    PgOutputBytes time(Instant t) {
        return i64(PgTime.toPgMicros(t));
    }

    /** A NUL-terminated UTF-8 string. */
    PgOutputBytes string(String s) {
        return raw(s.getBytes(StandardCharsets.UTF_8)).u8(0);
    }

    PgOutputBytes raw(byte[] bytes) {
        out.write(bytes, 0, bytes.length);
        return this;
    }

    /** The [xid] prefix, written when not null. */
    PgOutputBytes xid(Long xid) {
        return xid == null ? this : u32(xid);
    }

    /** A TupleData structure: Int16 count, then per column its kind and, for 't' and 'b', Int32 length and bytes. */
    PgOutputBytes tuple(TupleData tuple) {
        u16(tuple.size());
        for (int i = 0; i < tuple.size(); i++) {
            ColumnKind kind = tuple.kind(i);
            u8(kind.code());
            if (kind.hasValue()) {
                i32(tuple.length(i)).raw(tuple.bytes(i));
            }
        }
        return this;
    }

    int size() {
        return out.size();
    }

    byte[] bytes() {
        return out.toByteArray();
    }

    private <M extends PgOutputMessage> Sample<M> expect(M expected) {
        return new Sample<>(bytes(), expected);
    }

    // --- one factory per message type, field by field as in the manual ---

    static Sample<Begin> begin(Lsn finalLsn, Instant commitTime, long xid) {
        return message('B').lsn(finalLsn).time(commitTime).u32(xid).expect(new Begin(finalLsn, commitTime, xid));
    }

    static Sample<Commit> commit(Lsn commitLsn, Lsn endLsn, Instant commitTime) {
        return message('C').u8(0).lsn(commitLsn).lsn(endLsn).time(commitTime)
                .expect(new Commit((byte) 0, commitLsn, endLsn, commitTime));
    }

    static Sample<Origin> origin(Lsn originCommitLsn, String name) {
        return message('O').lsn(originCommitLsn).string(name).expect(new Origin(originCommitLsn, name));
    }

    static Sample<Relation> relation(Long xid, long relationId, String namespace, String name, ReplicaIdentity identity,
            List<Relation.Column> columns) {
        PgOutputBytes b = message('R').xid(xid).u32(relationId).string(namespace).string(name).u8(identity.code())
                .u16(columns.size());
        for (Relation.Column c : columns) {
            b.u8(c.key() ? 1 : 0).string(c.name()).u32(c.typeOid()).i32(c.typeModifier());
        }
        return b.expect(new Relation(xid, relationId, namespace, name, identity, columns));
    }

    static Sample<Type> type(Long xid, long typeOid, String namespace, String name) {
        return message('Y').xid(xid).u32(typeOid).string(namespace).string(name)
                .expect(new Type(xid, typeOid, namespace, name));
    }

    static Sample<Insert> insert(Long xid, long relationId, TupleData newTuple) {
        return message('I').xid(xid).u32(relationId).u8('N').tuple(newTuple)
                .expect(new Insert(xid, relationId, newTuple));
    }

    static Sample<Update> update(Long xid, long relationId, TupleData keyTuple, TupleData oldTuple, TupleData newTuple) {
        PgOutputBytes b = message('U').xid(xid).u32(relationId);
        if (keyTuple != null) {
            b.u8('K').tuple(keyTuple);
        }
        if (oldTuple != null) {
            b.u8('O').tuple(oldTuple);
        }
        return b.u8('N').tuple(newTuple).expect(new Update(xid, relationId, keyTuple, oldTuple, newTuple));
    }

    static Sample<Delete> delete(Long xid, long relationId, TupleData keyTuple, TupleData oldTuple) {
        PgOutputBytes b = message('D').xid(xid).u32(relationId);
        if (keyTuple != null) {
            b.u8('K').tuple(keyTuple);
        } else {
            b.u8('O').tuple(oldTuple);
        }
        return b.expect(new Delete(xid, relationId, keyTuple, oldTuple));
    }

    static Sample<Truncate> truncate(Long xid, List<Long> relationIds, boolean cascade, boolean restartIdentity) {
        PgOutputBytes b = message('T').xid(xid).u32(relationIds.size()).u8((cascade ? 1 : 0) | (restartIdentity ? 2 : 0));
        relationIds.forEach(b::u32);
        return b.expect(new Truncate(xid, relationIds, cascade, restartIdentity));
    }

    static Sample<LogicalMessage> logicalMessage(Long xid, boolean transactional, Lsn lsn, String prefix, byte[] content) {
        return message('M').xid(xid).u8(transactional ? 1 : 0).lsn(lsn).string(prefix).i32(content.length).raw(content)
                .expect(new LogicalMessage(xid, transactional, lsn, prefix, ByteBuffer.wrap(content.clone())));
    }

    static Sample<StreamStart> streamStart(long xid, boolean firstSegment) {
        return message('S').u32(xid).u8(firstSegment ? 1 : 0).expect(new StreamStart(xid, firstSegment));
    }

    static Sample<StreamStop> streamStop() {
        return message('E').expect(new StreamStop());
    }

    static Sample<StreamCommit> streamCommit(long xid, Lsn commitLsn, Lsn endLsn, Instant commitTime) {
        return message('c').u32(xid).u8(0).lsn(commitLsn).lsn(endLsn).time(commitTime)
                .expect(new StreamCommit(xid, (byte) 0, commitLsn, endLsn, commitTime));
    }

    /** Protocol 2/3 layout: xid and subxid only. */
    static Sample<StreamAbort> streamAbort(long xid, long subXid) {
        return message('A').u32(xid).u32(subXid).expect(new StreamAbort(xid, subXid, null, null));
    }

    /** Protocol 4 with streaming = parallel: with the abort LSN and time. */
    static Sample<StreamAbort> streamAbort(long xid, long subXid, Lsn abortLsn, Instant abortTime) {
        return message('A').u32(xid).u32(subXid).lsn(abortLsn).time(abortTime)
                .expect(new StreamAbort(xid, subXid, abortLsn, abortTime));
    }

    static Sample<BeginPrepare> beginPrepare(Lsn prepareLsn, Lsn endLsn, Instant prepareTime, long xid, String gid) {
        return message('b').lsn(prepareLsn).lsn(endLsn).time(prepareTime).u32(xid).string(gid)
                .expect(new BeginPrepare(prepareLsn, endLsn, prepareTime, xid, gid));
    }

    static Sample<Prepare> prepare(Lsn prepareLsn, Lsn endLsn, Instant prepareTime, long xid, String gid) {
        return message('P').u8(0).lsn(prepareLsn).lsn(endLsn).time(prepareTime).u32(xid).string(gid)
                .expect(new Prepare((byte) 0, prepareLsn, endLsn, prepareTime, xid, gid));
    }

    static Sample<CommitPrepared> commitPrepared(Lsn commitLsn, Lsn endLsn, Instant commitTime, long xid, String gid) {
        return message('K').u8(0).lsn(commitLsn).lsn(endLsn).time(commitTime).u32(xid).string(gid)
                .expect(new CommitPrepared((byte) 0, commitLsn, endLsn, commitTime, xid, gid));
    }

    static Sample<RollbackPrepared> rollbackPrepared(Lsn prepareEndLsn, Lsn rollbackEndLsn, Instant prepareTime,
            Instant rollbackTime, long xid, String gid) {
        return message('r').u8(0).lsn(prepareEndLsn).lsn(rollbackEndLsn).time(prepareTime).time(rollbackTime).u32(xid)
                .string(gid)
                .expect(new RollbackPrepared((byte) 0, prepareEndLsn, rollbackEndLsn, prepareTime, rollbackTime, xid, gid));
    }

    static Sample<StreamPrepare> streamPrepare(Lsn prepareLsn, Lsn endLsn, Instant prepareTime, long xid, String gid) {
        return message('p').u8(0).lsn(prepareLsn).lsn(endLsn).time(prepareTime).u32(xid).string(gid)
                .expect(new StreamPrepare((byte) 0, prepareLsn, endLsn, prepareTime, xid, gid));
    }

    // --- helpers ---

    /** Whether a message can only come between Stream Start and Stream Stop. */
    static boolean needsStream(PgOutputMessage m) {
        return switch (m.messageType()) {
            case RELATION -> ((Relation) m).xid() != null;
            case TYPE -> ((Type) m).xid() != null;
            case INSERT -> ((Insert) m).xid() != null;
            case UPDATE -> ((Update) m).xid() != null;
            case DELETE -> ((Delete) m).xid() != null;
            case TRUNCATE -> ((Truncate) m).xid() != null;
            case MESSAGE -> ((LogicalMessage) m).xid() != null;
            case STREAM_STOP -> true;
            case BEGIN, COMMIT, ORIGIN, STREAM_START, STREAM_COMMIT, STREAM_ABORT, BEGIN_PREPARE, PREPARE, COMMIT_PREPARED,
                    ROLLBACK_PREPARED, STREAM_PREPARE -> false;
        };
    }

    /** Puts a decoder inside a stream block. */
    static void enterStream(PgOutputDecoder decoder) {
        decoder.decode(streamStart(0xFFFF_FFF0L, true).bytes());
    }

    static final Lsn LSN_A = Lsn.parse("0/1A2B3B08");
    static final Lsn LSN_B = Lsn.parse("16/B374D848");
    static final Lsn LSN_HIGH = Lsn.parse("FFFFFFFF/FFFFFFF0");
    static final Instant TIME_A = Instant.parse("2024-05-06T07:08:09.123456Z");
    static final Instant TIME_B = Instant.parse("1999-12-31T23:59:59.999999Z");
    static final long BIG = 0xFFFF_FFF0L;

    static TupleData mixedTuple() {
        return TupleData.builder().text("42").nullValue().unchangedToast().text("").binary(new byte[] {0, 1, (byte) 0xFF})
                .text("grüße ✓").build();
    }

    /** One valid sample of every message type, [xid]-carrying ones both outside (null) and inside a stream. */
    static List<Sample<?>> allSamples() {
        List<Sample<?>> samples = new ArrayList<>();
        samples.add(begin(LSN_A, TIME_A, 1234));
        samples.add(commit(LSN_A, LSN_B, TIME_A));
        samples.add(origin(LSN_HIGH, "node_ä"));
        for (Long xid : new Long[] {null, BIG}) {
            samples.add(relation(xid, BIG, "public", "orders", ReplicaIdentity.DEFAULT,
                    List.of(new Relation.Column(true, "id", 23, -1), new Relation.Column(false, "note", 25, -1),
                            new Relation.Column(false, "price", 1700, 655366))));
            samples.add(relation(xid, 16384, "", "pg_thing", ReplicaIdentity.NOTHING, List.of()));
            samples.add(type(xid, BIG, "", "mood"));
            samples.add(insert(xid, BIG, mixedTuple()));
            samples.add(update(xid, 16384, null, null, mixedTuple()));
            samples.add(update(xid, 16384, TupleData.builder().text("1").nullValue().build(), null, mixedTuple()));
            samples.add(update(xid, 16384, null, mixedTuple(), mixedTuple()));
            samples.add(delete(xid, 16384, TupleData.builder().text("1").nullValue().build(), null));
            samples.add(delete(xid, 16384, null, mixedTuple()));
            samples.add(truncate(xid, List.of(16384L, BIG), true, false));
            samples.add(truncate(xid, List.of(), false, true));
            samples.add(logicalMessage(xid, true, LSN_B, "walhook", new byte[] {(byte) 0xFF, 0, (byte) 0x80}));
            samples.add(logicalMessage(xid, false, LSN_B, "", new byte[0]));
        }
        samples.add(streamStart(BIG, true));
        samples.add(streamStop());
        samples.add(streamCommit(BIG, LSN_A, LSN_B, TIME_A));
        samples.add(streamAbort(BIG, BIG - 1));
        samples.add(streamAbort(BIG, BIG, LSN_B, TIME_B));
        samples.add(beginPrepare(LSN_A, LSN_B, TIME_A, BIG, "gid-1"));
        samples.add(prepare(LSN_A, LSN_B, TIME_A, BIG, "gid-1"));
        samples.add(commitPrepared(LSN_A, LSN_B, TIME_A, BIG, "gid-1"));
        samples.add(rollbackPrepared(LSN_A, LSN_B, TIME_A, TIME_B, BIG, "gid-1"));
        samples.add(streamPrepare(LSN_A, LSN_B, TIME_A, BIG, "gid-1"));
        return samples;
    }

    // --- random valid messages, for the fuzz test ---

    private static final long[] EDGE_U32 = {0, 1, 0x7FFF_FFFFL, 0x8000_0000L, 0xFFFF_FFFFL, 16384};
    private static final String[] NAMES = {"", "a", "public", "orders", "grüße", "表", "🐘", "x y", "\u00ff"};

    static Sample<?> randomSample(Random random) {
        Long xid = random.nextBoolean() ? null : u32(random);
        return switch (random.nextInt(20)) {
            case 0 -> begin(lsn(random), time(random), u32(random));
            case 1 -> commit(lsn(random), lsn(random), time(random));
            case 2 -> origin(lsn(random), name(random));
            case 3 -> relation(xid, u32(random), name(random), name(random),
                    ReplicaIdentity.values()[random.nextInt(4)], columns(random));
            case 4 -> type(xid, u32(random), name(random), name(random));
            case 5 -> insert(xid, u32(random), tuple(random));
            case 6 -> {
                int shape = random.nextInt(3);
                yield update(xid, u32(random), shape == 1 ? tuple(random) : null, shape == 2 ? tuple(random) : null,
                        tuple(random));
            }
            case 7 -> random.nextBoolean() ? delete(xid, u32(random), tuple(random), null)
                    : delete(xid, u32(random), null, tuple(random));
            case 8 -> {
                List<Long> ids = new ArrayList<>();
                for (int i = random.nextInt(5); i > 0; i--) {
                    ids.add(u32(random));
                }
                yield truncate(xid, ids, random.nextBoolean(), random.nextBoolean());
            }
            case 9 -> logicalMessage(xid, random.nextBoolean(), lsn(random), name(random), bytes(random));
            case 10 -> streamStart(u32(random), random.nextBoolean());
            case 11 -> streamStop();
            case 12 -> streamCommit(u32(random), lsn(random), lsn(random), time(random));
            case 13 -> random.nextBoolean() ? streamAbort(u32(random), u32(random))
                    : streamAbort(u32(random), u32(random), lsn(random), time(random));
            case 14 -> beginPrepare(lsn(random), lsn(random), time(random), u32(random), name(random));
            case 15 -> prepare(lsn(random), lsn(random), time(random), u32(random), name(random));
            case 16 -> commitPrepared(lsn(random), lsn(random), time(random), u32(random), name(random));
            case 17 -> rollbackPrepared(lsn(random), lsn(random), time(random), time(random), u32(random), name(random));
            case 18 -> streamPrepare(lsn(random), lsn(random), time(random), u32(random), name(random));
            default -> insert(xid, u32(random), tuple(random));
        };
    }

    private static long u32(Random random) {
        return random.nextBoolean() ? EDGE_U32[random.nextInt(EDGE_U32.length)] : random.nextInt() & 0xFFFF_FFFFL;
    }

    private static Lsn lsn(Random random) {
        return Lsn.of(random.nextInt(4) == 0 ? 0 : random.nextLong());
    }

    private static Instant time(Random random) {
        // Any Int64 is a valid wire timestamp; keep to what round-trips through Instant exactly.
        return PgTime.toInstant(random.nextLong() >> random.nextInt(64));
    }

    private static String name(Random random) {
        return NAMES[random.nextInt(NAMES.length)] + (random.nextBoolean() ? "" : Integer.toString(random.nextInt(1000)));
    }

    private static byte[] bytes(Random random) {
        byte[] bytes = new byte[random.nextInt(4) == 0 ? 0 : random.nextInt(24)];
        random.nextBytes(bytes);
        return bytes;
    }

    private static List<Relation.Column> columns(Random random) {
        List<Relation.Column> columns = new ArrayList<>();
        for (int i = random.nextInt(6); i > 0; i--) {
            columns.add(new Relation.Column(random.nextBoolean(), name(random), u32(random), random.nextInt()));
        }
        return columns;
    }

    static TupleData tuple(Random random) {
        TupleData.Builder builder = TupleData.builder();
        for (int i = random.nextInt(7); i > 0; i--) {
            switch (random.nextInt(4)) {
                case 0 -> builder.nullValue();
                case 1 -> builder.unchangedToast();
                case 2 -> builder.textBytes(bytes(random));
                default -> builder.binary(bytes(random));
            }
        }
        return builder.build();
    }
}
