package io.walhook.pgoutput;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;

/**
 * One row image of an Insert, Update or Delete: the pgoutput {@code TupleData} structure, read
 * without copying.
 *
 * <pre>
 * Int16  number of columns
 * then per column one of
 *   'n'                      NULL
 *   'u'                      unchanged TOASTed value (the actual value is not sent)
 *   't' Int32 len, byte[len] text value (the type's output function)
 *   'b' Int32 len, byte[len] binary value (the type's send function; option binary)
 * </pre>
 *
 * <p>The manual on {@code 'u'}: "Identifies unchanged TOASTed value (the actual value is not sent)."
 * It appears when an Update leaves a column stored out of line untouched; under REPLICA IDENTITY
 * FULL the value can be taken from the old tuple, otherwise it is unknown. It is not NULL: keep the
 * four {@link ColumnKind}s apart, and a {@code 't'} value of length zero (the empty string) apart
 * from both.
 *
 * <p><b>Validity.</b> A decoded {@code TupleData} holds a reference to the bytes of the message it
 * was read from plus, per column, its kind, offset and length. It is valid only as long as the
 * caller leaves those bytes alone: a caller that reuses or overwrites its receive buffer must
 * {@link #detach()} first any tuple it keeps (for example the changes of a streamed transaction
 * buffered until its Stream Commit). Instances are otherwise immutable and safe to read from
 * several threads.
 *
 * <p>Columns are numbered from 0 in the order of the latest Relation message for the table. Values
 * are available without building Strings through {@link #length}, {@link #copyTo(int, byte[], int)}
 * and {@link #slice}. {@link #equals} compares kinds and bytes.
 *
 * @see <a href="https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html">Logical
 *     Replication Message Formats, TupleData</a>
 */
public final class TupleData {

    private final ByteBuffer buffer;
    private final byte[] kinds;
    private final int[] offsets;
    private final int[] lengths;
    private final boolean detached;

    /**
     * @param buffer holds the values; read with absolute indexes only, never handed out writable
     * @param kinds the wire letter per column
     * @param offsets absolute index of each value in {@code buffer} (unused for 'n' and 'u')
     * @param lengths length of each value (0 for 'n' and 'u')
     * @param detached whether {@code buffer} is owned by this tuple alone
     */
    TupleData(ByteBuffer buffer, byte[] kinds, int[] offsets, int[] lengths, boolean detached) {
        this.buffer = buffer;
        this.kinds = kinds;
        this.offsets = offsets;
        this.lengths = lengths;
        this.detached = detached;
    }

    /** A builder for tuples made by hand, in tests and for synthetic events; the result is detached. */
    public static Builder builder() {
        return new Builder();
    }

    /** The number of columns. */
    public int size() {
        return kinds.length;
    }

    /** What column {@code i} carries. */
    public ColumnKind kind(int i) {
        Objects.checkIndex(i, kinds.length);
        return kindOf(kinds[i]);
    }

    /** Whether column {@code i} is {@code 'n'}: NULL (or, in a {@code 'K'} tuple, a non-key column). */
    public boolean isNull(int i) {
        return kind(i) == ColumnKind.NULL;
    }

    /** Whether column {@code i} is {@code 'u'}: an unchanged TOASTed value that was not sent. */
    public boolean isUnchangedToast(int i) {
        return kind(i) == ColumnKind.UNCHANGED_TOAST;
    }

    /** Whether column {@code i} carries bytes: {@code 't'} or {@code 'b'}. */
    public boolean hasValue(int i) {
        return kind(i).hasValue();
    }

    /** The bytes of all its values together (what it holds of its message). */
    public long valueBytes() {
        long sum = 0;
        for (int length : lengths) {
            sum += length;
        }
        return sum;
    }

    /**
     * The length in bytes of the value of column {@code i}.
     *
     * @throws IllegalStateException if the column is NULL or UNCHANGED_TOAST
     */
    public int length(int i) {
        requireValue(i);
        return lengths[i];
    }

    /**
     * The text value of column {@code i}, decoded as UTF-8 (malformed sequences become U+FFFD).
     *
     * @throws IllegalStateException unless the column is TEXT
     */
    public String text(int i) {
        ColumnKind kind = kind(i);
        if (kind != ColumnKind.TEXT) {
            throw new IllegalStateException("column " + i + " is " + kind + ", not TEXT");
        }
        if (buffer.hasArray()) {
            return new String(buffer.array(), buffer.arrayOffset() + offsets[i], lengths[i], StandardCharsets.UTF_8);
        }
        return new String(bytes(i), StandardCharsets.UTF_8);
    }

    /**
     * A copy of the bytes of column {@code i} (TEXT: UTF-8; BINARY: the type's send format).
     *
     * @throws IllegalStateException if the column is NULL or UNCHANGED_TOAST
     */
    public byte[] bytes(int i) {
        requireValue(i);
        byte[] copy = new byte[lengths[i]];
        buffer.get(offsets[i], copy, 0, lengths[i]);
        return copy;
    }

    /**
     * A read-only view of the bytes of column {@code i}, position 0, limit its length; valid as long
     * as this tuple is.
     *
     * @throws IllegalStateException if the column is NULL or UNCHANGED_TOAST
     */
    public ByteBuffer slice(int i) {
        requireValue(i);
        return buffer.slice(offsets[i], lengths[i]).asReadOnlyBuffer();
    }

    /**
     * Folds the bytes of column {@code i} into {@code h}, {@code h = 31 * h + b} for each (signed)
     * byte in order, as a loop over {@link #slice} would, without making the slice.
     *
     * @throws IllegalStateException if the column is NULL or UNCHANGED_TOAST
     */
    public int hashInto(int i, int h) {
        requireValue(i);
        int end = offsets[i] + lengths[i];
        if (buffer.hasArray()) {
            byte[] array = buffer.array();
            int base = buffer.arrayOffset();
            for (int p = base + offsets[i]; p < base + end; p++) {
                h = 31 * h + array[p];
            }
        } else {
            for (int p = offsets[i]; p < end; p++) {
                h = 31 * h + buffer.get(p);
            }
        }
        return h;
    }

    /**
     * Copies the bytes of column {@code i} into {@code dst} at {@code dstOffset}.
     *
     * @throws IllegalStateException if the column is NULL or UNCHANGED_TOAST
     * @throws IndexOutOfBoundsException if {@code dst} has less than {@link #length(int)} bytes from {@code dstOffset}
     */
    public void copyTo(int i, byte[] dst, int dstOffset) {
        requireValue(i);
        Objects.checkFromIndexSize(dstOffset, lengths[i], dst.length);
        buffer.get(offsets[i], dst, dstOffset, lengths[i]);
    }

    /**
     * Writes the bytes of column {@code i} into {@code dst} at its position, advancing it.
     *
     * @throws IllegalStateException if the column is NULL or UNCHANGED_TOAST
     * @throws java.nio.BufferOverflowException if {@code dst} has less room than {@link #length(int)}
     */
    public void copyTo(int i, ByteBuffer dst) {
        requireValue(i);
        dst.put(buffer.slice(offsets[i], lengths[i]));
    }

    /**
     * A tuple equal to this one that owns a compact copy of its bytes, independent of the message
     * buffer. Returns this tuple when it is already detached.
     */
    public TupleData detach() {
        if (detached) {
            return this;
        }
        int total = 0;
        for (int length : lengths) {
            total += length;
        }
        byte[] copy = new byte[total];
        int[] newOffsets = new int[kinds.length];
        int at = 0;
        for (int i = 0; i < kinds.length; i++) {
            newOffsets[i] = at;
            buffer.get(offsets[i], copy, at, lengths[i]);
            at += lengths[i];
        }
        return new TupleData(ByteBuffer.wrap(copy), kinds.clone(), newOffsets, lengths.clone(), true);
    }

    private void requireValue(int i) {
        ColumnKind kind = kind(i);
        if (!kind.hasValue()) {
            throw new IllegalStateException("column " + i + " is " + kind + " and has no bytes");
        }
    }

    private static ColumnKind kindOf(byte code) {
        return switch (code) {
            case 'n' -> ColumnKind.NULL;
            case 'u' -> ColumnKind.UNCHANGED_TOAST;
            case 't' -> ColumnKind.TEXT;
            case 'b' -> ColumnKind.BINARY;
            default -> throw new IllegalStateException("corrupt column kind " + code);
        };
    }

    /** Equal when both have the same columns, each of the same kind and, for TEXT and BINARY, the same bytes. */
    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof TupleData other) || !Arrays.equals(kinds, other.kinds) || !Arrays.equals(lengths, other.lengths)) {
            return false;
        }
        for (int i = 0; i < kinds.length; i++) {
            for (int j = 0; j < lengths[i]; j++) {
                if (buffer.get(offsets[i] + j) != other.buffer.get(other.offsets[i] + j)) {
                    return false;
                }
            }
        }
        return true;
    }

    @Override
    public int hashCode() {
        int h = Arrays.hashCode(kinds);
        for (int i = 0; i < kinds.length; i++) {
            for (int j = 0; j < lengths[i]; j++) {
                h = 31 * h + buffer.get(offsets[i] + j);
            }
        }
        return h;
    }

    /** Kinds and lengths only, never values (they may be personal data): {@code TupleData[t(3), n, u, b(8)]}. */
    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("TupleData[");
        for (int i = 0; i < kinds.length; i++) {
            if (i > 0) {
                sb.append(", ");
            }
            sb.append((char) kinds[i]);
            if (kinds[i] == 't' || kinds[i] == 'b') {
                sb.append('(').append(lengths[i]).append(')');
            }
        }
        return sb.append(']').toString();
    }

    /** Builds a detached {@link TupleData} column by column. */
    public static final class Builder {
        private byte[] data = new byte[64];
        private int used;
        private byte[] kinds = new byte[8];
        private int[] offsets = new int[8];
        private int[] lengths = new int[8];
        private int count;

        private Builder() {
        }

        /** Appends an {@code 'n'} column. */
        public Builder nullValue() {
            return add((byte) 'n', null);
        }

        /** Appends a {@code 'u'} column. */
        public Builder unchangedToast() {
            return add((byte) 'u', null);
        }

        /** Appends a {@code 't'} column holding the UTF-8 bytes of {@code text}. */
        public Builder text(String text) {
            return add((byte) 't', text.getBytes(StandardCharsets.UTF_8));
        }

        /** Appends a {@code 't'} column holding these bytes as they are (they need not be valid UTF-8). */
        public Builder textBytes(byte[] bytes) {
            return add((byte) 't', bytes.clone());
        }

        /** Appends a {@code 'b'} column. */
        public Builder binary(byte[] bytes) {
            return add((byte) 'b', bytes.clone());
        }

        /** Appends a column of any kind; {@code bytes} is ignored for NULL and UNCHANGED_TOAST. */
        public Builder add(ColumnKind kind, byte[] bytes) {
            return switch (kind) {
                case NULL -> nullValue();
                case UNCHANGED_TOAST -> unchangedToast();
                case TEXT -> textBytes(bytes);
                case BINARY -> binary(bytes);
            };
        }

        private Builder add(byte kind, byte[] bytes) {
            if (count == kinds.length) {
                kinds = Arrays.copyOf(kinds, count * 2);
                offsets = Arrays.copyOf(offsets, count * 2);
                lengths = Arrays.copyOf(lengths, count * 2);
            }
            int length = bytes == null ? 0 : bytes.length;
            if (data.length - used < length) {
                data = Arrays.copyOf(data, Math.max(data.length * 2, used + length));
            }
            if (length > 0) {
                System.arraycopy(bytes, 0, data, used, length);
            }
            kinds[count] = kind;
            offsets[count] = used;
            lengths[count] = length;
            used += length;
            count++;
            return this;
        }

        /** The tuple of the columns appended so far. */
        public TupleData build() {
            return new TupleData(ByteBuffer.wrap(Arrays.copyOf(data, used)), Arrays.copyOf(kinds, count),
                    Arrays.copyOf(offsets, count), Arrays.copyOf(lengths, count), true);
        }
    }
}
