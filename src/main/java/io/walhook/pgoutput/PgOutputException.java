package io.walhook.pgoutput;

/**
 * Bytes that are not a well-formed pgoutput message or replication frame.
 *
 * <p>The one exception {@link PgOutputDecoder} (and the tests' replication frame decoder) throws for
 * bad input, whatever the problem: truncation, an unknown message type or tuple kind, a length or count
 * larger than the bytes left, a flags value the protocol does not define, trailing bytes, or a
 * message that is not allowed in the current stream state. Its message reads
 * {@code pgoutput 'R' at offset 17: string not terminated}.
 *
 * <p>The stream that produced such bytes cannot be trusted past this point: the caller should drop
 * the connection rather than skip the message.
 *
 * @see <a href="https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html">Logical
 *     Replication Message Formats</a>
 */
public final class PgOutputException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** The {@link #messageType()} used when the type byte itself is missing. */
    public static final char UNKNOWN_TYPE = '?';

    private final char messageType;
    private final int offset;
    private final String detail;

    /**
     * @param messageType the message's type byte ({@code 'R'}, or {@code 'w'}/{@code 'k'} for frames),
     *     {@link #UNKNOWN_TYPE} when there is none
     * @param offset where the problem was found, in bytes from the start of the message (its type byte)
     * @param detail what is wrong
     */
    public PgOutputException(char messageType, int offset, String detail) {
        super("pgoutput " + describe(messageType) + " at offset " + offset + ": " + detail);
        this.messageType = messageType;
        this.offset = offset;
        this.detail = detail;
    }

    /** The message's type byte, or {@link #UNKNOWN_TYPE} when it was missing. */
    public char messageType() {
        return messageType;
    }

    /** Where the problem was found, in bytes from the message's type byte (offset 0). */
    public int offset() {
        return offset;
    }

    /** What is wrong, without the type and offset. */
    public String detail() {
        return detail;
    }

    private static String describe(char type) {
        if (type >= 0x20 && type < 0x7F) {
            return "'" + type + "'";
        }
        return String.format("0x%02X", (int) type);
    }
}
