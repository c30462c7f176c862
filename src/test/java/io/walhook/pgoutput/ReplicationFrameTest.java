package io.walhook.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.walhook.pgoutput.PgOutputMessage.Begin;
import io.walhook.pgoutput.ReplicationFrame.PrimaryKeepalive;
import io.walhook.pgoutput.ReplicationFrame.XLogData;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class ReplicationFrameTest {

    private static final Instant ONE_SECOND_AND_TWO_MICROS = Instant.parse("2000-01-01T00:00:01.000002Z");

    @Test
    void decodesXLogDataAndItsPgOutputPayload() {
        byte[] payload = PgOutputBytes.begin(PgOutputBytes.LSN_A, PgOutputBytes.TIME_A, 7).bytes();
        byte[] frame = PgOutputBytes.message('w').lsn(PgOutputBytes.LSN_B).lsn(PgOutputBytes.LSN_HIGH).i64(1_000_002L)
                .raw(payload).bytes();

        XLogData data = (XLogData) ReplicationFrameDecoder.decode(frame);

        assertThat(data.dataStart()).isEqualTo(PgOutputBytes.LSN_B);
        assertThat(data.walEnd()).isEqualTo(PgOutputBytes.LSN_HIGH);
        assertThat(data.sendTime()).isEqualTo(ONE_SECOND_AND_TWO_MICROS);
        assertThat(data.data()).isEqualTo(ByteBuffer.wrap(payload));
        assertThat(data.data().position()).isZero();
        assertThat(new PgOutputDecoder().decode(data.data()))
                .isEqualTo(new Begin(PgOutputBytes.LSN_A, PgOutputBytes.TIME_A, 7));
        assertThat(data.toString()).contains(payload.length + " bytes");
    }

    @Test
    void decodesXLogDataWithEmptyPayload() {
        byte[] frame = PgOutputBytes.message('w').i64(0).i64(0).i64(0).bytes();
        XLogData data = (XLogData) ReplicationFrameDecoder.decode(frame);
        assertThat(data.data().remaining()).isZero();
    }

    @Test
    void decodesKeepalive() {
        for (int reply = 0; reply <= 1; reply++) {
            byte[] frame = PgOutputBytes.message('k').lsn(PgOutputBytes.LSN_B).i64(1_000_002L).u8(reply).bytes();
            assertThat(frame).hasSize(ReplicationFrameDecoder.KEEPALIVE_BYTES);
            assertThat(ReplicationFrameDecoder.decode(frame))
                    .isEqualTo(new PrimaryKeepalive(PgOutputBytes.LSN_B, ONE_SECOND_AND_TWO_MICROS, reply == 1));
        }
    }

    @Test
    void rejectsKeepaliveOfOtherLengthsOrReplyValues() {
        byte[] good = PgOutputBytes.message('k').lsn(PgOutputBytes.LSN_B).i64(0).u8(1).bytes();
        for (int length = 0; length < good.length; length++) {
            assertFailure(Arrays.copyOf(good, length), length == 0 ? '?' : 'k');
        }
        assertFailure(Arrays.copyOf(good, good.length + 1), 'k');
        byte[] two = good.clone();
        two[17] = 2;
        assertThat(assertFailure(two, 'k').offset()).isEqualTo(17);
    }

    @Test
    void rejectsTruncatedXLogDataHeader() {
        byte[] header = PgOutputBytes.message('w').i64(1).i64(2).i64(3).bytes();
        for (int length = 1; length < header.length; length++) {
            PgOutputException e = assertFailure(Arrays.copyOf(header, length), 'w');
            assertThat(e.offset()).isIn(1, 9, 17);
        }
    }

    @Test
    void rejectsUnknownAndEmptyFrames() {
        assertThat(assertFailure(new byte[] {'r', 0}, 'r').detail()).isEqualTo("unknown replication frame type");
        assertThat(assertFailure(new byte[0], '?').detail()).isEqualTo("empty replication frame");
    }

    @Test
    void encodesStandbyStatusUpdateByteForByte() {
        byte[] encoded = StandbyStatusEncoder.encode(Lsn.parse("0/1A2B3B08"), Lsn.parse("16/B374D848"),
                Lsn.parse("FFFFFFFF/FFFFFFFF"), ONE_SECOND_AND_TWO_MICROS, true);
        assertThat(encoded).containsExactly(
                'r',
                0x00, 0x00, 0x00, 0x00, 0x1A, 0x2B, 0x3B, 0x08,
                0x00, 0x00, 0x00, 0x16, 0xB3, 0x74, 0xD8, 0x48,
                0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                0x00, 0x00, 0x00, 0x00, 0x00, 0x0F, 0x42, 0x42,
                0x01);
        assertThat(StandbyStatusEncoder.encode(Lsn.INVALID, Lsn.INVALID, Lsn.INVALID,
                Instant.parse("2000-01-01T00:00:00Z"), false)).hasSize(34).containsOnly('r', 0);
    }

    @Test
    void encodesClientTimeBeforeThePostgresEpochAsNegative() {
        byte[] encoded = StandbyStatusEncoder.encode(Lsn.INVALID, Lsn.INVALID, Lsn.INVALID,
                Instant.parse("1999-12-31T23:59:59.999999999Z"), false);
        assertThat(ByteBuffer.wrap(encoded, 25, 8).getLong()).isEqualTo(-1L);
    }

    @Test
    void convertsPostgresTimestamps() {
        assertThat(PgTime.toInstant(0)).isEqualTo(Instant.parse("2000-01-01T00:00:00Z"));
        assertThat(PgTime.toInstant(-1)).isEqualTo(Instant.parse("1999-12-31T23:59:59.999999Z"));
        assertThat(PgTime.toPgMicros(Instant.parse("2024-05-06T07:08:09.123456789Z")))
                .isEqualTo(PgTime.toPgMicros(Instant.parse("2024-05-06T07:08:09.123456Z")));
        for (long micros : new long[] {Long.MIN_VALUE, -1_000_001L, 0, 1, 767_948_889_123_456L, Long.MAX_VALUE}) {
            assertThat(PgTime.toPgMicros(PgTime.toInstant(micros))).isEqualTo(micros);
        }
        assertThatThrownBy(() -> PgTime.toPgMicros(Instant.MAX)).isInstanceOf(ArithmeticException.class);
    }

    private static PgOutputException assertFailure(byte[] frame, char type) {
        Throwable thrown = catchThrowable(() -> ReplicationFrameDecoder.decode(frame));
        assertThat(thrown).isExactlyInstanceOf(PgOutputException.class);
        PgOutputException e = (PgOutputException) thrown;
        assertThat(e.messageType()).isEqualTo(type);
        return e;
    }
}
