package io.walhook.pgoutput;

import java.time.Instant;

/**
 * PostgreSQL's wire timestamps: a signed 64-bit count of microseconds since 2000-01-01 00:00:00 UTC
 * (the PostgreSQL epoch, 946684800 seconds after the Unix epoch). Used by every timestamp of the
 * replication protocol (commit, prepare and abort times, frame send times, status client time).
 */
public final class PgTime {

    /** Seconds from 1970-01-01 to 2000-01-01 UTC. */
    public static final long PG_EPOCH_SECONDS = 946_684_800L;

    private static final long MICROS_PER_SECOND = 1_000_000L;

    private PgTime() {
    }

    /** The instant of a PostgreSQL timestamp, to the microsecond. Defined for every {@code long}. */
    public static Instant toInstant(long pgMicros) {
        long seconds = Math.floorDiv(pgMicros, MICROS_PER_SECOND);
        long micros = Math.floorMod(pgMicros, MICROS_PER_SECOND);
        return Instant.ofEpochSecond(seconds + PG_EPOCH_SECONDS, micros * 1_000L);
    }

    /**
     * The PostgreSQL timestamp of an instant; nanoseconds below the microsecond are dropped (floor).
     *
     * @throws ArithmeticException if the instant is beyond the range of a {@code long} of microseconds
     */
    public static long toPgMicros(Instant instant) {
        long seconds = Math.subtractExact(instant.getEpochSecond(), PG_EPOCH_SECONDS);
        long micros = instant.getNano() / 1_000L;
        if (seconds < 0 && micros > 0) {
            // Near Long.MIN_VALUE, seconds * 10^6 alone overflows although the sum does not.
            return Math.addExact(Math.multiplyExact(seconds + 1, MICROS_PER_SECOND), micros - MICROS_PER_SECOND);
        }
        return Math.addExact(Math.multiplyExact(seconds, MICROS_PER_SECOND), micros);
    }
}
