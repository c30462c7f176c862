package io.walhook.backfill;

import java.time.Instant;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;

/**
 * A backfill as stored in {@code <state schema>.backfill} (docs/backfills.md): which tables of which
 * subscription, how they are read, and how far each got.
 *
 * @param progress per table ({@code schema.table}), in the order read; a table not yet started has none
 * @param maxRowsPerSecond null: as fast as delivery takes them
 */
public record Backfill(UUID id, String subscriptionId, String origin, State state, List<String> tables, String filter,
        int chunkSize, Integer maxRowsPerSecond, Map<String, TableProgress> progress, String error, Instant createdAt,
        Instant updatedAt, Instant finishedAt) {

    /** The default and the bounds of {@code chunk_size}. */
    public static final int DEFAULT_CHUNK_SIZE = 1000;
    public static final int MAX_CHUNK_SIZE = 100_000;
    /** {@code origin} of the backfill a configured subscription's {@code BACKFILL=initial} started. */
    public static final String INITIAL = "initial";
    public static final String API = "api";

    public Backfill {
        tables = List.copyOf(tables);
        progress = Map.copyOf(progress);
    }

    /**
     * How far one table got: the last key done (its key columns' text values, in key order), rows
     * sent, done, and the table's oid when it was read (0: not read yet, or stored before walhook kept
     * it): a table dropped and created again under the same name is another table.
     */
    /**
     * @param key the chunk key's shape the cursor was saved under ({@link SnapshotTable#keyShape}); null
     *     before a chunk was read, or when saved by an earlier walhook
     * @param keyNames the chunk key's column names, in key order, to watch the table by for rows moved
     *     after a restart ({@link BackfillRunner#watchTablesUnderWay}); null as {@code key} is
     */
    public record TableProgress(List<String> cursor, long rowsSent, boolean done, long oid, String key,
            List<String> keyNames) {
        public static final TableProgress NONE = new TableProgress(null, 0, false, 0, null, null);

        public TableProgress {
            cursor = cursor == null ? null : List.copyOf(cursor);
            keyNames = keyNames == null ? null : List.copyOf(keyNames);
        }
    }

    public TableProgress progressOf(String table) {
        return progress.getOrDefault(table, TableProgress.NONE);
    }

    public long rowsSent() {
        return progress.values().stream().mapToLong(TableProgress::rowsSent).sum();
    }

    /** {@code running} and {@code paused} hold their tables: a second backfill of one of them waits. */
    public enum State {
        RUNNING, PAUSED, DONE, CANCELLED, FAILED;

        public String wireName() {
            return name().toLowerCase(Locale.ROOT);
        }

        public static State parse(String text) {
            return valueOf(text.toUpperCase(Locale.ROOT));
        }

        public boolean ended() {
            return this == DONE || this == CANCELLED || this == FAILED;
        }
    }
}
