package io.walhook.change;

/**
 * The reusable buffers of one {@link ValueConverters} set, shared by every converter it made.
 *
 * <p>Values are copied out of the tuple before they are inspected because {@link
 * io.walhook.pgoutput.TupleData} hands out bytes only by copy (its buffer may be direct or
 * read-only). Reusing these arrays keeps the hot path free of per-value allocation; a value longer
 * than {@link #RETAIN_LIMIT} gets arrays of its own so one huge row does not pin its size in memory
 * for the life of the stream. A set therefore keeps at most about 7 MB (1 Mi bytes, chars and
 * array tokens) however large the values it has seen.
 */
final class ConverterBuffers {

    /** The largest buffer (in elements) kept between values. */
    static final int RETAIN_LIMIT = 1 << 20;

    /** Room for any date/time PostgreSQL prints in ISO style, rewritten to ISO 8601. */
    static final int DATE_TIME_CAPACITY = 64;

    private byte[] bytes = new byte[256];
    private char[] chars = new char[256];

    /** Output of {@link PgDateTimes}; never used for anything else, so it may hold a result while other buffers are busy. */
    final char[] dateTime = new char[DATE_TIME_CAPACITY];

    /** The array parser, with its own reusable token buffer. */
    final PgArrayParser arrays = new PgArrayParser();


    /** A byte buffer of at least {@code length}; its content is undefined. */
    byte[] bytes(int length) {
        if (length <= bytes.length) {
            return bytes;
        }
        if (length > RETAIN_LIMIT) {
            return new byte[length];
        }
        bytes = new byte[grown(bytes.length, length)];
        return bytes;
    }

    /** A char buffer of at least {@code length}; its content is undefined. */
    char[] chars(int length) {
        if (length <= chars.length) {
            return chars;
        }
        if (length > RETAIN_LIMIT) {
            return new char[length];
        }
        chars = new char[grown(chars.length, length)];
        return chars;
    }

    static int grown(int current, int needed) {
        long doubled = Math.min((long) current * 2, RETAIN_LIMIT);
        return (int) Math.max(doubled, needed);
    }
}
