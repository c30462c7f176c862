package io.walhook.pgoutput;

import io.walhook.pgoutput.ReplicationFrame.PrimaryKeepalive;
import io.walhook.pgoutput.ReplicationFrame.XLogData;
import java.nio.ByteBuffer;

/**
 * Decodes the CopyData payloads the walsender sends during {@code START_REPLICATION}:
 *
 * <pre>
 * XLogData          'w' | Int64 dataStart | Int64 walEnd | Int64 sendTime | Byte[n] one pgoutput message
 * Primary keepalive 'k' | Int64 walEnd | Int64 sendTime | Byte1 replyRequested (0 or 1)
 * </pre>
 *
 * <p>Frame first, decode second: the XLogData payload goes to {@link PgOutputDecoder}. Bad input
 * throws a {@link PgOutputException} with type {@code 'w'} or {@code 'k'} (or the unknown type byte)
 * and the offset from the frame start. Stateless.
 *
 * @see <a href="https://www.postgresql.org/docs/current/protocol-replication.html#PROTOCOL-REPLICATION-START-REPLICATION">START_REPLICATION</a>
 */
public final class ReplicationFrameDecoder {

    /** Type byte and three Int64 before the payload. */
    public static final int XLOG_DATA_HEADER_BYTES = 1 + 8 + 8 + 8;
    /** The whole keepalive frame. */
    public static final int KEEPALIVE_BYTES = 1 + 8 + 8 + 1;

    private ReplicationFrameDecoder() {
    }

    /**
     * Decodes one frame, from the buffer's position (the type byte) to its limit; the buffer's position
     * and limit are not changed. The payload of an XLogData shares the frame's bytes.
     *
     * @throws PgOutputException if the bytes are not one well-formed frame
     */
    public static ReplicationFrame decode(ByteBuffer frame) {
        MessageReader r = new MessageReader(frame);
        if (r.remaining() == 0) {
            throw r.error("empty replication frame");
        }
        char type = r.type();
        switch (type) {
            case 'w': {
                XLogData data = new XLogData(r.lsn("dataStart"), r.lsn("walEnd"), r.time("sendTime"),
                        r.slice(r.remaining()));
                r.end();
                return data;
            }
            case 'k': {
                int body = r.remaining();
                if (body != KEEPALIVE_BYTES - 1) {
                    throw r.error("keepalive body is " + body + " bytes; expected " + (KEEPALIVE_BYTES - 1));
                }
                PrimaryKeepalive keepalive = new PrimaryKeepalive(r.lsn("walEnd"), r.time("sendTime"),
                        r.bool("replyRequested"));
                r.end();
                return keepalive;
            }
            default:
                throw r.errorAt(0, "unknown replication frame type");
        }
    }

    /** Decodes one frame held in a whole array; see {@link #decode(ByteBuffer)}. */
    public static ReplicationFrame decode(byte[] frame) {
        return decode(ByteBuffer.wrap(frame));
    }
}
