package io.walhook.pgoutput;

import static io.walhook.pgoutput.PgOutputBytes.BIG;
import static io.walhook.pgoutput.PgOutputBytes.LSN_A;
import static io.walhook.pgoutput.PgOutputBytes.LSN_B;
import static io.walhook.pgoutput.PgOutputBytes.TIME_A;
import static io.walhook.pgoutput.PgOutputBytes.TIME_B;
import static io.walhook.pgoutput.PgOutputBytes.message;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.walhook.pgoutput.PgOutputBytes.Sample;
import io.walhook.pgoutput.PgOutputMessage.Begin;
import io.walhook.pgoutput.PgOutputMessage.Delete;
import io.walhook.pgoutput.PgOutputMessage.Insert;
import io.walhook.pgoutput.PgOutputMessage.LogicalMessage;
import io.walhook.pgoutput.PgOutputMessage.Relation;
import io.walhook.pgoutput.PgOutputMessage.StreamAbort;
import io.walhook.pgoutput.PgOutputMessage.Truncate;
import io.walhook.pgoutput.PgOutputMessage.Type;
import io.walhook.pgoutput.PgOutputMessage.Update;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class PgOutputDecoderTest {

    private final PgOutputDecoder decoder = new PgOutputDecoder();

    // --- every message type ---

    @Test
    void decodesEveryMessageTypeInAndOutOfStreamBlocks() {
        Set<MessageType> seen = EnumSet.noneOf(MessageType.class);
        for (Sample<?> sample : PgOutputBytes.allSamples()) {
            PgOutputMessage decoded = sample.decoder().decode(sample.bytes());
            assertThat(decoded).as("%s", sample.expected()).isEqualTo(sample.expected());
            assertThat(decoded.messageType().code()).isEqualTo((char) sample.bytes()[0]);
            seen.add(decoded.messageType());
        }
        assertThat(seen).containsExactlyInAnyOrder(MessageType.values());
    }

    @Test
    void prefixesXidOnlyInsideStreamBlocks() {
        TupleData row = TupleData.builder().text("1").build();
        assertThat(decoder.decode(PgOutputBytes.insert(null, 16384, row).bytes()))
                .isEqualTo(new Insert(null, 16384, row));

        decoder.decode(PgOutputBytes.streamStart(777, true).bytes());
        assertThat(decoder.inStream()).isTrue();
        assertThat(decoder.decode(PgOutputBytes.insert(778L, 16384, row).bytes()))
                .isEqualTo(new Insert(778L, 16384, row));
        assertThat(decoder.decode(PgOutputBytes.type(778L, 20000, "public", "mood").bytes()))
                .isEqualTo(new Type(778L, 20000, "public", "mood"));
        // Origin has no [xid] even inside a block (sent right after Stream Start when the transaction has one).
        assertThat(decoder.decode(PgOutputBytes.origin(LSN_A, "node").bytes())).isEqualTo(
                new PgOutputMessage.Origin(LSN_A, "node"));
        decoder.decode(PgOutputBytes.streamStop().bytes());
        assertThat(decoder.inStream()).isFalse();

        assertThat(decoder.decode(PgOutputBytes.insert(null, 16384, row).bytes()))
                .isEqualTo(new Insert(null, 16384, row));
    }

    @Test
    void readsXidsAndOidsAbove2Pow31AsUnsigned() {
        Begin begin = (Begin) decoder.decode(PgOutputBytes.begin(LSN_A, TIME_A, 0xFFFF_FFF0L).bytes());
        assertThat(begin.xid()).isEqualTo(4_294_967_280L);

        Relation relation = (Relation) decoder.decode(PgOutputBytes.relation(null, 0x8000_0000L, "s", "t",
                ReplicaIdentity.FULL, List.of(new Relation.Column(true, "c", 0xFFFF_FFFFL, -1))).bytes());
        assertThat(relation.relationId()).isEqualTo(2_147_483_648L);
        assertThat(relation.columns().get(0).typeOid()).isEqualTo(4_294_967_295L);
        assertThat(relation.columns().get(0).typeModifier()).isEqualTo(-1);

        decoder.decode(PgOutputBytes.streamStart(0xFFFF_FFFFL, false).bytes());
        Truncate truncate = (Truncate) decoder.decode(
                PgOutputBytes.truncate(0xFFFF_FFFEL, List.of(0xFFFF_FFF0L), false, false).bytes());
        assertThat(truncate.xid()).isEqualTo(4_294_967_294L);
        assertThat(truncate.relationIds()).containsExactly(4_294_967_280L);
    }

    @Test
    void keepsMicrosecondsOfTimestampsAndTheirEpoch() {
        Begin begin = (Begin) decoder.decode(message('B').lsn(LSN_A).i64(1_000_002L).u32(1).bytes());
        assertThat(begin.commitTime()).isEqualTo(Instant.parse("2000-01-01T00:00:01.000002Z"));
        Begin before2000 = (Begin) decoder.decode(message('B').lsn(LSN_A).i64(-1L).u32(1).bytes());
        assertThat(before2000.commitTime()).isEqualTo(TIME_B);
    }

    @Test
    void decodesRelationColumnsAndIdentity() {
        Relation relation = (Relation) decoder.decode(PgOutputBytes.relation(null, 16384, "", "pg_thing",
                ReplicaIdentity.INDEX, List.of(new Relation.Column(true, "id", 23, -1),
                        new Relation.Column(false, "price", 1700, 655366))).bytes());
        assertThat(relation.namespace()).isEmpty();
        assertThat(relation.effectiveNamespace()).isEqualTo("pg_catalog");
        assertThat(relation.replicaIdentity()).isEqualTo(ReplicaIdentity.INDEX);
        assertThat(relation.columns()).extracting(Relation.Column::key).containsExactly(true, false);
        assertThat(relation.columns().get(1).typeModifier()).isEqualTo(655366);
    }

    @Test
    void decodesNonAsciiNames() {
        String schema = "schéma_ü";
        String table = "表_🐘";
        String column = "Größe ✓";
        Sample<Relation> sample = PgOutputBytes.relation(null, 16384, schema, table, ReplicaIdentity.DEFAULT,
                List.of(new Relation.Column(false, column, 25, -1)));
        Relation relation = (Relation) decoder.decode(sample.bytes());
        assertThat(relation.namespace()).isEqualTo(schema);
        assertThat(relation.effectiveNamespace()).isEqualTo(schema);
        assertThat(relation.relationName()).isEqualTo(table);
        assertThat(relation.columns().get(0).name()).isEqualTo(column);
    }

    @Test
    void decodes1600Columns() {
        List<Relation.Column> columns = new ArrayList<>();
        TupleData.Builder row = TupleData.builder();
        for (int i = 0; i < 1600; i++) {
            columns.add(new Relation.Column(i == 0, "column_" + i, 25, -1));
            row.text("value " + i);
        }
        Sample<Relation> relation = PgOutputBytes.relation(null, 16384, "public", "wide", ReplicaIdentity.DEFAULT,
                columns);
        assertThat(decoder.decode(relation.bytes())).isEqualTo(relation.expected());

        Sample<Insert> insert = PgOutputBytes.insert(null, 16384, row.build());
        Insert decoded = (Insert) decoder.decode(insert.bytes());
        assertThat(decoded).isEqualTo(insert.expected());
        assertThat(decoded.newTuple().size()).isEqualTo(1600);
        assertThat(decoded.newTuple().text(1599)).isEqualTo("value 1599");
    }

    // --- tuples ---

    @Test
    void keepsUnchangedToastDistinctFromNull() {
        byte[] binary = {0, 1, (byte) 0xFF};
        TupleData tuple = ((Insert) decoder.decode(PgOutputBytes.insert(null, 16384,
                TupleData.builder().text("").nullValue().unchangedToast().binary(binary).text("x").build()).bytes()))
                .newTuple();

        assertThat(tuple.size()).isEqualTo(5);
        assertThat(List.of(tuple.kind(0), tuple.kind(1), tuple.kind(2), tuple.kind(3))).containsExactly(
                ColumnKind.TEXT, ColumnKind.NULL, ColumnKind.UNCHANGED_TOAST, ColumnKind.BINARY);
        assertThat(tuple.text(0)).isEmpty();
        assertThat(tuple.length(0)).isZero();
        assertThat(tuple.isNull(0)).isFalse();
        assertThat(tuple.isNull(1)).isTrue();
        assertThat(tuple.isUnchangedToast(1)).isFalse();
        assertThat(tuple.isUnchangedToast(2)).isTrue();
        assertThat(tuple.isNull(2)).isFalse();
        assertThat(tuple.hasValue(2)).isFalse();
        assertThat(tuple.bytes(3)).containsExactly(binary);
        assertThat(tuple.text(4)).isEqualTo("x");
    }

    @Test
    void refusesValueAccessOnNullAndUnchangedToast() {
        TupleData tuple = TupleData.builder().nullValue().unchangedToast().binary(new byte[] {1}).build();
        for (int i = 0; i < 2; i++) {
            int column = i;
            assertThatThrownBy(() -> tuple.text(column)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> tuple.bytes(column)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> tuple.length(column)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> tuple.slice(column)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> tuple.copyTo(column, new byte[8], 0)).isInstanceOf(IllegalStateException.class);
        }
        assertThatThrownBy(() -> tuple.text(2)).isInstanceOf(IllegalStateException.class).hasMessageContaining("BINARY");
        assertThatThrownBy(() -> tuple.kind(3)).isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void exposesValuesWithoutCopyingThroughSliceAndCopyTo() {
        byte[] frame = PgOutputBytes.insert(null, 16384, TupleData.builder().text("héllo").build()).bytes();
        TupleData tuple = ((Insert) decoder.decode(frame)).newTuple();
        byte[] utf8 = "héllo".getBytes(StandardCharsets.UTF_8);

        ByteBuffer slice = tuple.slice(0);
        assertThat(slice.isReadOnly()).isTrue();
        assertThat(slice.remaining()).isEqualTo(utf8.length);
        byte[] fromSlice = new byte[slice.remaining()];
        slice.get(fromSlice);
        assertThat(fromSlice).containsExactly(utf8);

        byte[] dst = new byte[utf8.length + 2];
        tuple.copyTo(0, dst, 2);
        assertThat(Arrays.copyOfRange(dst, 2, dst.length)).containsExactly(utf8);
        assertThatThrownBy(() -> tuple.copyTo(0, new byte[utf8.length], 1)).isInstanceOf(IndexOutOfBoundsException.class);

        ByteBuffer out = ByteBuffer.allocate(16);
        tuple.copyTo(0, out);
        assertThat(out.position()).isEqualTo(utf8.length);

        // The view shares the frame's bytes: that is the zero-copy contract.
        frame[frame.length - 1] = 'O';
        assertThat(tuple.text(0)).isEqualTo("héllO");
    }

    @Test
    void detachedTupleSurvivesReuseOfTheFrameBuffer() {
        TupleData expected = PgOutputBytes.mixedTuple();
        byte[] frame = PgOutputBytes.insert(null, 16384, expected).bytes();
        TupleData view = ((Insert) decoder.decode(frame)).newTuple();
        TupleData detached = view.detach();
        assertThat(detached).isEqualTo(expected).hasSameHashCodeAs(expected);
        assertThat(detached.detach()).isSameAs(detached);

        Arrays.fill(frame, (byte) 'z');
        assertThat(detached).isEqualTo(expected);
        assertThat(detached.text(5)).isEqualTo("grüße ✓");
        assertThat(view).isNotEqualTo(expected);
    }

    @Test
    void detachedLogicalMessageSurvivesReuseOfTheFrameBuffer() {
        byte[] content = {(byte) 0xC3, 0x28, 0, (byte) 0xFF};
        byte[] frame = PgOutputBytes.logicalMessage(null, true, LSN_A, "p", content).bytes();
        LogicalMessage view = (LogicalMessage) decoder.decode(frame);
        LogicalMessage detached = view.detach();
        Arrays.fill(frame, (byte) 0);
        assertThat(detached.contentBytes()).containsExactly(content);
        assertThat(view.contentBytes()).containsOnly(0);
    }

    @Test
    void printsNoValues() {
        TupleData tuple = TupleData.builder().text("secret").nullValue().unchangedToast().binary(new byte[3]).build();
        assertThat(tuple).hasToString("TupleData[t(6), n, u, b(3)]");
        LogicalMessage m = (LogicalMessage) decoder.decode(
                PgOutputBytes.logicalMessage(null, false, LSN_A, "p", "secret".getBytes(StandardCharsets.UTF_8)).bytes());
        assertThat(m.toString()).doesNotContain("secret").contains("6 bytes");
    }

    @Test
    void distinguishesTupleMarkersOfUpdateAndDelete() {
        TupleData key = TupleData.builder().text("1").nullValue().build();
        TupleData row = TupleData.builder().text("1").text("a").build();
        Update withKey = (Update) decoder.decode(PgOutputBytes.update(null, 1, key, null, row).bytes());
        assertThat(withKey.keyTuple()).isEqualTo(key);
        assertThat(withKey.oldTuple()).isNull();
        Update withOld = (Update) decoder.decode(PgOutputBytes.update(null, 1, null, row, row).bytes());
        assertThat(withOld.keyTuple()).isNull();
        assertThat(withOld.oldTuple()).isEqualTo(row);
        Update bare = (Update) decoder.decode(PgOutputBytes.update(null, 1, null, null, row).bytes());
        assertThat(bare.keyTuple()).isNull();
        assertThat(bare.oldTuple()).isNull();
        Delete deleteKey = (Delete) decoder.decode(PgOutputBytes.delete(null, 1, key, null).bytes());
        assertThat(deleteKey.keyTuple()).isEqualTo(key);
        Delete deleteOld = (Delete) decoder.decode(PgOutputBytes.delete(null, 1, null, row).bytes());
        assertThat(deleteOld.oldTuple()).isEqualTo(row);
    }

    // --- messages ---

    @Test
    void keepsMessageContentThatIsNotUtf8() {
        byte[] content = {(byte) 0xFF, (byte) 0xFE, 0, (byte) 0x80, (byte) 0xC3};
        LogicalMessage m = (LogicalMessage) decoder.decode(
                PgOutputBytes.logicalMessage(null, false, LSN_B, "bin", content).bytes());
        assertThat(m.contentBytes()).containsExactly(content);
        assertThat(m.contentLength()).isEqualTo(5);
        assertThat(m.content().isReadOnly()).isTrue();
        assertThat(m.transactional()).isFalse();
        m.content().get(); // moving one view does not move the next
        assertThat(m.content().remaining()).isEqualTo(5);
    }

    @Test
    void decodesZeroLengthMessageContent() {
        LogicalMessage m = (LogicalMessage) decoder.decode(
                PgOutputBytes.logicalMessage(null, true, LSN_B, "walhook-heartbeat", new byte[0]).bytes());
        assertThat(m.contentLength()).isZero();
        assertThat(m.prefix()).isEqualTo("walhook-heartbeat");
    }

    @Test
    void decodesStreamAbortWithAndWithoutParallelFields() {
        assertThat(decoder.decode(PgOutputBytes.streamAbort(BIG, 12).bytes()))
                .isEqualTo(new StreamAbort(BIG, 12, null, null));
        assertThat(decoder.decode(PgOutputBytes.streamAbort(BIG, BIG, LSN_B, TIME_A).bytes()))
                .isEqualTo(new StreamAbort(BIG, BIG, LSN_B, TIME_A));
    }

    @Test
    void rejectsStreamAbortOfOtherLengths() {
        for (int body : new int[] {0, 4, 7, 9, 16, 23, 25, 32}) {
            byte[] bytes = message('A').raw(new byte[body]).bytes();
            assertThat(decodeFailure(bytes)).as("body %d", body).satisfies(e -> {
                assertThat(e.messageType()).isEqualTo('A');
                assertThat(e.detail()).contains("expected 8").contains("or 24");
            });
        }
    }

    // --- stream state ---

    @Test
    void rejectsStreamStartInsideStreamBlock() {
        decoder.decode(PgOutputBytes.streamStart(1, true).bytes());
        PgOutputException e = decodeFailure(PgOutputBytes.streamStart(2, true).bytes());
        assertThat(e.messageType()).isEqualTo('S');
        assertThat(e.offset()).isZero();
        assertThat(decoder.inStream()).isTrue();
    }

    /**
     * A streamed transaction's end, or another transaction's start, inside a stream block: the
     * changes after it in the block joined a transaction already ended, and were never delivered.
     */
    @Test
    void rejectsACommitAbortOrBeginInsideStreamBlock() {
        for (PgOutputBytes.Sample<?> inside : List.of(PgOutputBytes.streamCommit(1, LSN_A, LSN_B, TIME_A),
                PgOutputBytes.streamAbort(1, 1), PgOutputBytes.begin(LSN_A, TIME_A, 2))) {
            PgOutputDecoder fresh = new PgOutputDecoder();
            fresh.decode(PgOutputBytes.streamStart(1, true).bytes());
            byte[] bytes = inside.bytes();
            assertThatThrownBy(() -> fresh.decode(bytes)).isInstanceOf(PgOutputException.class)
                    .hasMessageContaining("inside a stream block");
            assertThat(fresh.inStream()).isTrue();
            fresh.decode(PgOutputBytes.streamStop().bytes());
            assertThat(fresh.decode(bytes)).as("after its Stream Stop").isNotNull();
        }
    }

    @Test
    void rejectsStreamStopOutsideStreamBlock() {
        PgOutputException e = decodeFailure(PgOutputBytes.streamStop().bytes());
        assertThat(e.messageType()).isEqualTo('E');
        assertThat(decoder.inStream()).isFalse();
    }

    @Test
    void resetLeavesStreamBlock() {
        decoder.decode(PgOutputBytes.streamStart(1, true).bytes());
        decoder.reset();
        assertThat(decoder.inStream()).isFalse();
        assertThat(decoder.decode(PgOutputBytes.streamStart(1, true).bytes())).isNotNull();
    }

    @Test
    void leavesStreamStateUnchangedWhenAMessageFails() {
        byte[] badStart = message('S').u32(1).u8(2).bytes();
        decodeFailure(badStart);
        assertThat(decoder.inStream()).isFalse();
        decoder.decode(PgOutputBytes.streamStart(1, true).bytes());
        decodeFailure(message('E').u8(0).bytes());
        assertThat(decoder.inStream()).isTrue();
    }

    // --- flags ---

    @Test
    void rejectsNonZeroFlagsWhereTheProtocolSaysZero() {
        List<byte[]> bad = List.of(
                message('C').u8(1).lsn(LSN_A).lsn(LSN_B).time(TIME_A).bytes(),
                message('c').u32(1).u8(1).lsn(LSN_A).lsn(LSN_B).time(TIME_A).bytes(),
                message('P').u8(1).lsn(LSN_A).lsn(LSN_B).time(TIME_A).u32(1).string("g").bytes(),
                message('K').u8(0x80).lsn(LSN_A).lsn(LSN_B).time(TIME_A).u32(1).string("g").bytes(),
                message('r').u8(2).lsn(LSN_A).lsn(LSN_B).time(TIME_A).time(TIME_A).u32(1).string("g").bytes(),
                message('p').u8(1).lsn(LSN_A).lsn(LSN_B).time(TIME_A).u32(1).string("g").bytes());
        for (byte[] bytes : bad) {
            PgOutputException e = decodeFailure(bytes);
            assertThat(e.messageType()).isEqualTo((char) bytes[0]);
            assertThat(e.offset()).isEqualTo(bytes[0] == 'c' ? 5 : 1);
            assertThat(e.detail()).contains("flags must be 0");
        }
    }

    @Test
    void rejectsUndefinedFlagBits() {
        assertThat(decodeFailure(message('M').u8(2).lsn(LSN_A).string("p").i32(0).bytes()).offset()).isEqualTo(1);
        assertThat(decodeFailure(message('T').u32(0).u8(4).bytes()).offset()).isEqualTo(5);
        assertThat(decodeFailure(message('S').u32(1).u8(2).bytes()).offset()).isEqualTo(5);
        PgOutputException columnFlags = decodeFailure(
                message('R').u32(1).string("s").string("t").u8('d').u16(1).u8(2).string("c").u32(25).i32(-1).bytes());
        assertThat(columnFlags.offset()).isEqualTo(1 + 4 + 2 + 2 + 1 + 2);
        assertThat(columnFlags.detail()).contains("column 0");
    }

    @Test
    void decodesTruncateOptionBits() {
        assertThat(decoder.decode(message('T').u32(1).u8(3).u32(16384).bytes()))
                .isEqualTo(new Truncate(null, List.of(16384L), true, true));
        assertThat(decoder.decode(message('T').u32(0).u8(2).bytes()))
                .isEqualTo(new Truncate(null, List.of(), false, true));
    }

    // --- malformed input ---

    @Test
    void rejectsTruncatedRelation() {
        Sample<Relation> sample = PgOutputBytes.relation(null, 16384, "public", "orders", ReplicaIdentity.DEFAULT,
                List.of(new Relation.Column(true, "id", 23, -1)));
        byte[] bytes = sample.bytes();
        for (int length = 1; length < bytes.length; length++) {
            PgOutputException e = decodeFailure(Arrays.copyOf(bytes, length));
            assertThat(e.messageType()).isEqualTo('R');
            assertThat(e.offset()).isBetween(1, length);
        }
        // Cut inside the relation name: 'R' + OID (4) + "public\0" (7) puts the name at offset 12.
        PgOutputException e = decodeFailure(Arrays.copyOf(bytes, 15));
        assertThat(e).hasMessage("pgoutput 'R' at offset 12: relation name: string not terminated");
    }

    @Test
    void rejectsEveryTruncationOfEveryMessage() {
        for (Sample<?> sample : PgOutputBytes.allSamples()) {
            byte[] bytes = sample.bytes();
            for (int length = 0; length < bytes.length; length++) {
                if (bytes[0] == 'A' && length == 9) {
                    continue; // a parallel Stream Abort cut after subxid is the valid 8-byte form
                }
                byte[] cut = Arrays.copyOf(bytes, length);
                Throwable thrown = catchThrowable(() -> sample.decoder().decode(cut));
                assertThat(thrown).as("%s cut to %d bytes", sample.expected(), length)
                        .isExactlyInstanceOf(PgOutputException.class);
                PgOutputException e = (PgOutputException) thrown;
                assertThat(e.messageType()).isEqualTo(length == 0 ? '?' : (char) bytes[0]);
                assertThat(e.offset()).isBetween(0, length);
            }
        }
    }

    @Test
    void rejectsTrailingBytesAfterEveryMessage() {
        for (Sample<?> sample : PgOutputBytes.allSamples()) {
            byte[] longer = Arrays.copyOf(sample.bytes(), sample.bytes().length + 3);
            PgOutputException e = (PgOutputException) catchThrowable(() -> sample.decoder().decode(longer));
            assertThat(e).as("%s", sample.expected()).isNotNull();
            if (sample.bytes()[0] != 'A') { // Stream Abort checks its whole length first
                assertThat(e.detail()).isEqualTo("3 trailing bytes");
                assertThat(e.offset()).isEqualTo(sample.bytes().length);
            }
        }
    }

    @Test
    void rejectsEmptyMessage() {
        PgOutputException e = decodeFailure(new byte[0]);
        assertThat(e.messageType()).isEqualTo('?');
        assertThat(e.offset()).isZero();
        assertThat(e).hasMessage("pgoutput '?' at offset 0: empty message");
    }

    @Test
    void rejectsUnknownMessageType() {
        for (int type : new int[] {'Z', 'a', 0, 0xFF, 'w', 'k'}) {
            PgOutputException e = decodeFailure(new byte[] {(byte) type, 0, 0, 0, 0});
            assertThat(e.messageType()).isEqualTo((char) type);
            assertThat(e.offset()).isZero();
            assertThat(e.detail()).isEqualTo("unknown message type");
        }
        assertThat(decodeFailure(new byte[] {(byte) 0xFF})).hasMessage("pgoutput 0xFF at offset 0: unknown message type");
    }

    @Test
    void rejectsUnknownTupleKind() {
        PgOutputException e = decodeFailure(message('I').u32(1).u8('N').u16(2).u8('n').u8('x').bytes());
        assertThat(e.offset()).isEqualTo(1 + 4 + 1 + 2 + 1);
        assertThat(e.detail()).contains("column 1").contains("unknown kind 'x'");
    }

    @Test
    void rejectsUnknownTupleMarkers() {
        assertThat(decodeFailure(message('I').u32(1).u8('K').u16(0).bytes()).offset()).isEqualTo(5);
        assertThat(decodeFailure(message('U').u32(1).u8('X').u16(0).bytes()).offset()).isEqualTo(5);
        assertThat(decodeFailure(message('U').u32(1).u8('K').u16(0).u8('O').u16(0).bytes()).offset()).isEqualTo(8);
        assertThat(decodeFailure(message('D').u32(1).u8('N').u16(0).bytes()).offset()).isEqualTo(5);
    }

    @Test
    void rejectsUnknownReplicaIdentity() {
        PgOutputException e = decodeFailure(message('R').u32(1).string("s").string("t").u8('z').u16(0).bytes());
        assertThat(e.offset()).isEqualTo(9);
        assertThat(e.detail()).contains("replica identity 'z'");
    }

    @Test
    void rejectsCountsLargerThanTheRemainingBytes() {
        // Relation: 65535 columns of at least 10 bytes each in a few bytes.
        PgOutputException relation = decodeFailure(
                message('R').u32(1).string("s").string("t").u8('d').u16(0xFFFF).raw(new byte[100]).bytes());
        assertThat(relation.offset()).isEqualTo(10);
        assertThat(relation.detail()).contains("65535");
        // Tuple: 65535 columns of at least one byte each.
        assertThat(decodeFailure(message('I').u32(1).u8('N').u16(0xFFFF).u8('n').bytes()).offset()).isEqualTo(6);
        // Truncate: 4294967295 relations.
        assertThat(decodeFailure(message('T').u32(0xFFFF_FFFFL).u8(0).u32(1).bytes()).detail()).contains("4294967295");
        assertThat(decodeFailure(message('T').u32(0x4000_0000L).u8(0).bytes()).offset()).isEqualTo(1);
    }

    @Test
    void rejectsValueLengthsLargerThanTheRemainingBytes() {
        for (long length : new long[] {0xFFFF_FFFFL, 0x8000_0000L, 0x7FFF_FFFFL, 4}) {
            for (char kind : new char[] {'t', 'b'}) {
                PgOutputException e = decodeFailure(message('I').u32(1).u8('N').u16(1).u8(kind).u32(length)
                        .raw(new byte[3]).bytes());
                assertThat(e.offset()).isEqualTo(1 + 4 + 1 + 2 + 1);
                assertThat(e.detail()).contains("length " + length);
            }
        }
        PgOutputException content = decodeFailure(
                message('M').u8(1).lsn(LSN_A).string("p").u32(0xFFFF_FFFFL).raw(new byte[8]).bytes());
        assertThat(content.offset()).isEqualTo(1 + 1 + 8 + 2);
    }

    @Test
    void rejectsUnterminatedStrings() {
        PgOutputException e = decodeFailure(message('O').lsn(LSN_A).raw("node".getBytes(StandardCharsets.US_ASCII)).bytes());
        assertThat(e).hasMessage("pgoutput 'O' at offset 9: origin name: string not terminated");
    }

    // --- buffers ---

    @Test
    void decodesFromAnyKindOfBufferWithoutMovingIt() {
        Sample<Insert> sample = PgOutputBytes.insert(null, 16384, PgOutputBytes.mixedTuple());
        byte[] bytes = sample.bytes();
        byte[] padded = new byte[bytes.length + 10];
        System.arraycopy(bytes, 0, padded, 7, bytes.length);

        ByteBuffer heap = ByteBuffer.wrap(padded, 7, bytes.length).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer sliced = ByteBuffer.wrap(padded, 7, bytes.length).slice();
        ByteBuffer direct = ByteBuffer.allocateDirect(bytes.length + 4);
        direct.position(4);
        direct.put(bytes).position(4);
        ByteBuffer readOnly = ByteBuffer.wrap(padded, 7, bytes.length).asReadOnlyBuffer();

        for (ByteBuffer buffer : List.of(heap, sliced, direct, readOnly)) {
            int position = buffer.position();
            int limit = buffer.limit();
            Insert insert = (Insert) decoder.decode(buffer);
            assertThat(insert).isEqualTo(sample.expected());
            assertThat(insert.newTuple().text(5)).isEqualTo("grüße ✓");
            assertThat(buffer.position()).isEqualTo(position);
            assertThat(buffer.limit()).isEqualTo(limit);
        }
    }

    @Test
    void reportsOffsetsFromTheMessageStartNotTheBufferStart() {
        byte[] bytes = message('O').lsn(LSN_A).raw(new byte[] {'x'}).bytes();
        byte[] padded = new byte[bytes.length + 20];
        System.arraycopy(bytes, 0, padded, 20, bytes.length);
        PgOutputException e = (PgOutputException) catchThrowable(
                () -> decoder.decode(ByteBuffer.wrap(padded, 20, bytes.length)));
        assertThat(e.offset()).isEqualTo(9);
    }

    private PgOutputException decodeFailure(byte[] bytes) {
        Throwable thrown = catchThrowable(() -> decoder.decode(bytes));
        assertThat(thrown).isExactlyInstanceOf(PgOutputException.class);
        return (PgOutputException) thrown;
    }
}
