package io.walhook.pgoutput;

/**
 * The pgoutput message types, one per {@link PgOutputMessage} record, with their type byte.
 *
 * <p>Java 17 cannot switch over a sealed interface by pattern (that is Java 21), but a switch
 * expression over this enum without {@code default} must be exhaustive: switch on
 * {@link PgOutputMessage#messageType()} so that a new message type breaks the build where it is not
 * handled.
 *
 * @see <a href="https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html">Logical
 *     Replication Message Formats</a>
 */
public enum MessageType {
    BEGIN('B'),
    COMMIT('C'),
    ORIGIN('O'),
    RELATION('R'),
    TYPE('Y'),
    INSERT('I'),
    UPDATE('U'),
    DELETE('D'),
    TRUNCATE('T'),
    MESSAGE('M'),
    STREAM_START('S'),
    STREAM_STOP('E'),
    STREAM_COMMIT('c'),
    STREAM_ABORT('A'),
    BEGIN_PREPARE('b'),
    PREPARE('P'),
    COMMIT_PREPARED('K'),
    ROLLBACK_PREPARED('r'),
    STREAM_PREPARE('p');

    private final char code;

    MessageType(char code) {
        this.code = code;
    }

    /** The type byte on the wire. */
    public char code() {
        return code;
    }
}
