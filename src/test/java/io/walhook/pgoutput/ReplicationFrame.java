package io.walhook.pgoutput;

import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.Objects;

/**
 * A message the walsender sends inside CopyData during {@code START_REPLICATION}. Positions are
 * {@link Lsn}s and times are {@link Instant}s (sent as microseconds since 2000-01-01).
 *
 * @see <a href="https://www.postgresql.org/docs/current/protocol-replication.html#PROTOCOL-REPLICATION-START-REPLICATION">START_REPLICATION,
 *     XLogData and Primary keepalive message</a>
 */
public sealed interface ReplicationFrame {

    /**
     * {@code 'w'}: one pgoutput message. In logical replication {@code dataStart} and {@code walEnd}
     * are both the LSN the walsender attaches to the message: the change's LSN for a change, the
     * transaction's end LSN for Commit, Prepare and Commit Prepared, 0 for Relation and Type. It is not
     * the position to acknowledge; see {@link PgOutputMessage.Commit#endLsn()}.
     *
     * @param data the pgoutput message: a view of the frame bytes, valid while they are (the accessor
     *     returns a new view each time, position 0)
     */
    record XLogData(Lsn dataStart, Lsn walEnd, Instant sendTime, ByteBuffer data) implements ReplicationFrame {
        public XLogData {
            Objects.requireNonNull(dataStart, "dataStart");
            Objects.requireNonNull(walEnd, "walEnd");
            Objects.requireNonNull(sendTime, "sendTime");
            data = data.slice();
        }

        @Override
        public ByteBuffer data() {
            return data.duplicate();
        }

        /** Without the data, which may be personal. */
        @Override
        public String toString() {
            return "XLogData[dataStart=" + dataStart + ", walEnd=" + walEnd + ", sendTime=" + sendTime + ", data="
                    + data.remaining() + " bytes]";
        }
    }

    /**
     * {@code 'k'}: a keepalive.
     *
     * @param walEnd "The current end of WAL on the server": in logical replication, the end of the last
     *     WAL record decoded. When nothing received is still being delivered it is safe to acknowledge.
     * @param replyRequested "1 means that the client should reply to this message as soon as possible,
     *     to avoid a timeout disconnect."
     */
    record PrimaryKeepalive(Lsn walEnd, Instant sendTime, boolean replyRequested) implements ReplicationFrame {
        public PrimaryKeepalive {
            Objects.requireNonNull(walEnd, "walEnd");
            Objects.requireNonNull(sendTime, "sendTime");
        }
    }
}
