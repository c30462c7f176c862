package io.walhook.pgoutput;

/**
 * A table's {@code REPLICA IDENTITY} as sent in the Relation message ({@code relreplident}).
 *
 * <p>It decides what Update and Delete carry about the old row: DEFAULT and INDEX send a {@code 'K'}
 * tuple with the key columns (other columns as {@code 'n'}, which are not real NULLs) on every
 * Delete, and on an Update only when a key column changed; FULL sends the whole old row as
 * {@code 'O'}; NOTHING sends no old row.
 *
 * @see <a href="https://www.postgresql.org/docs/current/sql-altertable.html#SQL-ALTERTABLE-REPLICA-IDENTITY">REPLICA
 *     IDENTITY</a>
 */
public enum ReplicaIdentity {
    /** {@code 'd'}: the primary key, if any. */
    DEFAULT('d'),
    /** {@code 'n'}: no old row. */
    NOTHING('n'),
    /** {@code 'f'}: all columns. */
    FULL('f'),
    /** {@code 'i'}: the columns of the index named by {@code REPLICA IDENTITY USING INDEX}. */
    INDEX('i');

    private final char code;

    ReplicaIdentity(char code) {
        this.code = code;
    }

    /** The letter on the wire. */
    public char code() {
        return code;
    }

    /** The identity for a letter on the wire, or {@code null} when the letter is not one of them. */
    static ReplicaIdentity fromCode(int code) {
        return switch (code) {
            case 'd' -> DEFAULT;
            case 'n' -> NOTHING;
            case 'f' -> FULL;
            case 'i' -> INDEX;
            default -> null;
        };
    }
}
