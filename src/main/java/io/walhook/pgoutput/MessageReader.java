package io.walhook.pgoutput;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Instant;

/**
 * Bounds-checked big-endian reads over one message, for {@link PgOutputDecoder} (and the tests'
 * replication frame decoder). Every read checks the bytes left first and fails with a
 * {@link PgOutputException} naming the message type, the offset from the message start and the
 * field. Reads use absolute indexes on a private duplicate: the caller's buffer is not moved.
 */
final class MessageReader {

    /** Big-endian duplicate of the caller's buffer; same indexes, so tuples can keep referring to it. */
    final ByteBuffer buffer;
    private final int start;
    private final int limit;
    private int pos;
    private char type = PgOutputException.UNKNOWN_TYPE;

    MessageReader(ByteBuffer message) {
        this.buffer = message.duplicate().order(ByteOrder.BIG_ENDIAN);
        this.start = buffer.position();
        this.limit = buffer.limit();
        this.pos = start;
    }

    /** Reads the type byte; the caller has checked that there is one. */
    char type() {
        type = (char) (buffer.get(pos++) & 0xFF);
        return type;
    }

    /** Offset of the next read from the message start. */
    int offset() {
        return pos - start;
    }

    /** Absolute index of the next read in {@link #buffer}. */
    int position() {
        return pos;
    }

    int remaining() {
        return limit - pos;
    }

    PgOutputException error(String detail) {
        return errorAt(offset(), detail);
    }

    PgOutputException errorAt(int offset, String detail) {
        return new PgOutputException(type, offset, detail);
    }

    private void need(int bytes, String what) {
        if (limit - pos < bytes) {
            throw error("truncated: " + what + " needs " + bytes + " bytes, " + (limit - pos) + " left");
        }
    }

    int u8(String what) {
        need(1, what);
        return buffer.get(pos++) & 0xFF;
    }

    int u16(String what) {
        need(2, what);
        int v = buffer.getShort(pos) & 0xFFFF;
        pos += 2;
        return v;
    }

    int i32(String what) {
        need(4, what);
        int v = buffer.getInt(pos);
        pos += 4;
        return v;
    }

    long u32(String what) {
        return Integer.toUnsignedLong(i32(what));
    }

    long i64(String what) {
        need(8, what);
        long v = buffer.getLong(pos);
        pos += 8;
        return v;
    }

    Lsn lsn(String what) {
        return Lsn.of(i64(what));
    }

    Instant time(String what) {
        return PgTime.toInstant(i64(what));
    }

    /** A flags byte that the protocol defines as always 0. */
    byte zeroFlags(String what) {
        int at = offset();
        int flags = u8(what);
        if (flags != 0) {
            throw errorAt(at, what + " must be 0, got " + flags);
        }
        return 0;
    }

    /** A byte that must be 0 or 1. */
    boolean bool(String what) {
        int at = offset();
        int v = u8(what);
        if (v > 1) {
            throw errorAt(at, what + " must be 0 or 1, got " + v);
        }
        return v == 1;
    }

    /** A NUL-terminated UTF-8 string (malformed sequences become U+FFFD). */
    String string(String what) {
        int end = pos;
        while (end < limit && buffer.get(end) != 0) {
            end++;
        }
        if (end == limit) {
            throw error(what + ": string not terminated");
        }
        String s;
        int length = end - pos;
        if (buffer.hasArray()) {
            s = new String(buffer.array(), buffer.arrayOffset() + pos, length, StandardCharsets.UTF_8);
        } else {
            byte[] bytes = new byte[length];
            buffer.get(pos, bytes);
            s = new String(bytes, StandardCharsets.UTF_8);
        }
        pos = end + 1;
        return s;
    }

    /**
     * Reads an Int32 length, checks it against the bytes left, and returns it; the caller then takes
     * the bytes with {@link #slice(int)} or {@link #skip(int)}.
     */
    int length(String what) {
        int at = offset();
        long length = u32(what + " length");
        if (length > remaining()) {
            throw errorAt(at, what + " length " + length + " exceeds the " + remaining() + " bytes left");
        }
        return (int) length;
    }

    /** A view of the next {@code length} bytes (checked by the caller), sharing the message's content. */
    ByteBuffer slice(int length) {
        ByteBuffer slice = buffer.slice(pos, length);
        pos += length;
        return slice;
    }

    /**
     * As {@code length(which + " column " + column + " value")}, the name built only when the read
     * fails: every column of every row comes here.
     */
    int columnLength(String which, int column) {
        if (limit - pos >= 4) {
            long length = Integer.toUnsignedLong(buffer.getInt(pos));
            if (length <= limit - pos - 4) {
                pos += 4;
                return (int) length;
            }
        }
        return length(which + " column " + column + " value"); // fails, with the usual message
    }

    void skip(int length) {
        pos += length;
    }

    /**
     * Fails when a count of items, each at least {@code minBytesEach} long, cannot fit in the bytes
     * left; called before allocating anything sized by the count.
     */
    void checkCount(long count, int minBytesEach, int countOffset, String what) {
        if (count * minBytesEach > remaining()) {
            throw errorAt(countOffset, what + " " + count + " cannot fit in the " + remaining() + " bytes left");
        }
    }

    /** Fails unless every byte of the message was read. */
    void end() {
        if (pos != limit) {
            throw error((limit - pos) + " trailing bytes");
        }
    }

    static String describe(int b) {
        return b >= 0x20 && b < 0x7F ? "'" + (char) b + "'" : String.format("0x%02X", b);
    }
}
