package io.walhook.pgoutput;

import java.nio.charset.StandardCharsets;

/**
 * A PostgreSQL write-ahead log position ({@code pg_lsn}): an unsigned 64-bit byte offset into the WAL.
 *
 * <p>The text form is PostgreSQL's: the upper and lower 32 bits in uppercase hexadecimal without
 * leading zeros, separated by a slash ({@code 0/1A2B3B08}, {@code 16/B374D848}). Comparison is
 * unsigned, so positions at or above {@code 8000000000000000} order after the others.
 * {@link #INVALID} ({@code 0/0}) is PostgreSQL's {@code InvalidXLogRecPtr}; pgoutput sends it, for
 * example, as the data start of Relation and Type messages.
 *
 * @param value the position as an unsigned 64-bit number held in a {@code long}
 * @see <a href="https://www.postgresql.org/docs/current/datatype-pg-lsn.html">pg_lsn type</a>
 */
public record Lsn(long value) implements Comparable<Lsn> {

    /** {@code 0/0}, PostgreSQL's {@code InvalidXLogRecPtr}. */
    public static final Lsn INVALID = new Lsn(0L);

    private static final byte[] HEX = "0123456789ABCDEF".getBytes(StandardCharsets.US_ASCII);

    /* Spelled out: a record's generated equals goes through an invokedynamic bootstrap, on every event's path. */
    @Override
    public boolean equals(Object other) {
        return other instanceof Lsn lsn && lsn.value == value;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(value);
    }

    /** Returns the position with this unsigned 64-bit value. */
    public static Lsn of(long value) {
        return value == 0L ? INVALID : new Lsn(value);
    }

    /**
     * Parses PostgreSQL's text form {@code X/X}: one to eight hexadecimal digits (either case) on
     * each side of one slash, nothing else (no sign, no spaces).
     *
     * @throws IllegalArgumentException naming the text when it is not of that form
     */
    public static Lsn parse(String text) {
        if (text == null) {
            throw new IllegalArgumentException("invalid LSN: null");
        }
        int slash = text.indexOf('/');
        if (slash < 0) {
            throw invalid(text, "no '/'");
        }
        long high = parseHalf(text, 0, slash);
        long low = parseHalf(text, slash + 1, text.length());
        return of((high << 32) | low);
    }

    private static long parseHalf(String text, int from, int to) {
        int digits = to - from;
        if (digits < 1 || digits > 8) {
            throw invalid(text, "each side of '/' needs 1 to 8 hex digits");
        }
        long result = 0;
        for (int i = from; i < to; i++) {
            char c = text.charAt(i);
            int digit;
            if (c >= '0' && c <= '9') {
                digit = c - '0';
            } else if (c >= 'A' && c <= 'F') {
                digit = c - 'A' + 10;
            } else if (c >= 'a' && c <= 'f') {
                digit = c - 'a' + 10;
            } else {
                throw invalid(text, "'" + c + "' is not a hex digit");
            }
            result = (result << 4) | digit;
        }
        return result;
    }

    private static IllegalArgumentException invalid(String text, String why) {
        return new IllegalArgumentException("invalid LSN \"" + text + "\": " + why + " (expected X/X, e.g. 16/B374D848)");
    }

    /** Whether this is not {@link #INVALID}. */
    public boolean isValid() {
        return value != 0L;
    }

    /**
     * Returns the position {@code bytes} further on.
     *
     * @throws IllegalArgumentException if {@code bytes} is negative
     * @throws ArithmeticException if the result passes {@code FFFFFFFF/FFFFFFFF}
     */
    public Lsn plus(long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("negative LSN increment " + bytes);
        }
        long sum = value + bytes;
        if (Long.compareUnsigned(sum, value) < 0) {
            throw new ArithmeticException("LSN overflow: " + this + " + " + bytes);
        }
        return of(sum);
    }

    /** Whether this position is strictly before {@code other} (unsigned). */
    public boolean isBefore(Lsn other) {
        return compareTo(other) < 0;
    }

    /** Whether this position is strictly after {@code other} (unsigned). */
    public boolean isAfter(Lsn other) {
        return compareTo(other) > 0;
    }

    /** The later of two positions (unsigned); {@code a} when they are equal. */
    public static Lsn max(Lsn a, Lsn b) {
        return a.compareTo(b) >= 0 ? a : b;
    }

    @Override
    public int compareTo(Lsn other) {
        return Long.compareUnsigned(value, other.value);
    }

    /** The value as 16 uppercase hexadecimal digits, zero-padded ({@code 00000016B374D848}); sorts like the LSN. */
    public String hex16() {
        byte[] out = new byte[16];
        hex16(out, 0);
        return new String(out, StandardCharsets.ISO_8859_1);
    }

    /** {@link #hex16()} as ASCII bytes into {@code out} from {@code at}. */
    public void hex16(byte[] out, int at) {
        long v = value;
        for (int i = at + 15; i >= at; i--) {
            out[i] = HEX[(int) (v & 0xF)];
            v >>>= 4;
        }
    }

    /**
     * {@link #toString()}'s text as ASCII bytes into {@code out} from {@code at} (at most 17 bytes);
     * returns the next index. The event writer puts it straight into the JSON.
     */
    public int writeText(byte[] out, int at) {
        int end = hexDigits(value >>> 32, out, at);
        out[end++] = '/';
        return hexDigits(value & 0xFFFF_FFFFL, out, end);
    }

    /** {@code v} (at most 32 bits) in uppercase hex without leading zeros at {@code out[at]}; returns the next index. */
    private static int hexDigits(long v, byte[] out, int at) {
        int end = at + Math.max(1, (67 - Long.numberOfLeadingZeros(v)) / 4);
        // until the value runs out (as many digits as counted above): not a counted loop, see JsonWriter.number
        int i = end;
        do {
            out[--i] = HEX[(int) (v & 0xF)];
            v >>>= 4;
        } while (v != 0);
        return end;
    }

    /** PostgreSQL's text form, {@code %X/%X}: {@code 16/B374D848}. */
    @Override
    public String toString() {
        byte[] text = new byte[17];
        return new String(text, 0, writeText(text, 0), StandardCharsets.ISO_8859_1);
    }
}
