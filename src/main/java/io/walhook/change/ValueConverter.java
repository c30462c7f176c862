package io.walhook.change;

import io.walhook.pgoutput.TupleData;

/**
 * Writes the JSON value of one column of a row image, chosen once per Relation column by
 * {@link ValueConverters} and applied to every value of that column (docs/events.md,
 * "Values").
 *
 * <p>The value is read from the tuple's bytes and written straight to the JSON buffer; the text is
 * never turned into a {@link String} on the way.
 *
 * <p><b>Threads.</b> A converter shares scratch buffers with every other converter of the
 * {@link ValueConverters} that made it, so it may be used by one thread at a time: the thread that
 * serializes events. A thread that serializes in parallel needs converters from its own
 * {@code ValueConverters}.
 */
public interface ValueConverter {

    /**
     * Writes the JSON value of column {@code column} of {@code tuple}, which must hold a text value
     * (pgoutput's {@code 't'}).
     *
     * <p>The caller writes SQL NULL ({@code 'n'}) as {@code null} itself and leaves an unchanged
     * TOASTed value ({@code 'u'}) out of the row.
     *
     * @throws IllegalArgumentException if the column is NULL, unchanged TOAST or binary
     *     ({@code 'b'}, only sent when the replication session asks for {@code binary = true},
     *     which walhook does not)
     */
    void write(JsonWriter json, TupleData tuple, int column);

    /**
     * Whether every value of this converter is a JSON string, number or boolean, never a document or
     * an array (json/jsonb and arrays are not), so that {@link #value} gives it.
     */
    default boolean scalar() {
        return false;
    }

    /**
     * The value {@link #write} writes, as a reader of that JSON gets it back, without writing it: a
     * {@link String}, a {@link Long} (an integer within 64 bits), a {@link Double} (any other number)
     * or a {@link Boolean}. For filters, which need the row's values and not its JSON. Same
     * preconditions, exceptions and threading as {@link #write}.
     *
     * @throws UnsupportedOperationException if this converter is not {@link #scalar()}
     */
    default Object value(TupleData tuple, int column) {
        throw new UnsupportedOperationException(this + " writes JSON documents or arrays: read them from the JSON");
    }
}
