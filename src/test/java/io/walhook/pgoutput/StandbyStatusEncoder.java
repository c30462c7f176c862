package io.walhook.pgoutput;

import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.Objects;

/**
 * Encodes the Standby status update the client sends in CopyData during {@code START_REPLICATION}:
 *
 * <pre>
 * 'r' | Int64 write | Int64 flush | Int64 apply | Int64 clientTime | Byte1 replyRequested   (34 bytes)
 * </pre>
 *
 * <p>In logical replication the walsender uses {@code flush} (when not 0/0) as the slot's new
 * {@code confirmed_flush}: everything before it will not be sent again. {@code write} and
 * {@code apply} are for monitoring only. Keep {@code flush} monotonic and at an end LSN of a
 * transaction that is durable downstream (or a keepalive's {@code walEnd} when nothing is pending).
 *
 * @see <a href="https://www.postgresql.org/docs/current/protocol-replication.html#PROTOCOL-REPLICATION-STANDBY-STATUS-UPDATE">Standby
 *     status update</a>
 */
public final class StandbyStatusEncoder {

    /** Length of the encoded message. */
    public static final int BYTES = 1 + 8 + 8 + 8 + 8 + 1;

    private StandbyStatusEncoder() {
    }

    /**
     * @param clientTime the client's clock; sub-microsecond precision is dropped
     * @param replyRequested whether the server should reply at once with a keepalive
     * @return the 34 bytes of the message, starting with {@code 'r'}
     * @throws ArithmeticException if {@code clientTime} cannot be expressed in microseconds since 2000
     */
    public static byte[] encode(Lsn write, Lsn flush, Lsn apply, Instant clientTime, boolean replyRequested) {
        Objects.requireNonNull(write, "write");
        Objects.requireNonNull(flush, "flush");
        Objects.requireNonNull(apply, "apply");
        Objects.requireNonNull(clientTime, "clientTime");
        byte[] out = new byte[BYTES];
        ByteBuffer.wrap(out)
                .put((byte) 'r')
                .putLong(write.value())
                .putLong(flush.value())
                .putLong(apply.value())
                .putLong(PgTime.toPgMicros(clientTime))
                .put((byte) (replyRequested ? 1 : 0));
        return out;
    }
}
