package io.walhook.pgoutput;

/**
 * What one column of a {@link TupleData} carries. The four are distinct and must stay so: in
 * particular {@link #UNCHANGED_TOAST} is not {@link #NULL}, and a {@link #TEXT} value of length zero
 * (the empty string) is neither.
 *
 * @see <a href="https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html">Logical
 *     Replication Message Formats, TupleData</a>
 */
public enum ColumnKind {
    /** {@code 'n'}: "Identifies the data as NULL value." In a {@code 'K'} tuple, also every non-key column. */
    NULL('n'),
    /**
     * {@code 'u'}: "Identifies unchanged TOASTed value (the actual value is not sent)." The column
     * keeps the value stored out of line, which the message does not carry.
     */
    UNCHANGED_TOAST('u'),
    /** {@code 't'}: "Identifies the data as text formatted value": the type's output function, UTF-8. */
    TEXT('t'),
    /** {@code 'b'}: "Identifies the data as binary formatted value": the type's send function (option binary). */
    BINARY('b');

    private final char code;

    ColumnKind(char code) {
        this.code = code;
    }

    /** The letter on the wire. */
    public char code() {
        return code;
    }

    /** Whether the column carries bytes ({@link #TEXT} or {@link #BINARY}). */
    public boolean hasValue() {
        return this == TEXT || this == BINARY;
    }
}
