package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;

import org.junit.jupiter.api.Test;

import io.walhook.pgoutput.Lsn;

/** Which rows read from a durable queue are resends of changes older than one of their row read before them. */
class ReplayedRowsTest {

    /** Rows up to this id were written before this run. */
    private static final long BEFORE = 100;

    private static Job queued(long rowId, long lsn, int position, Ordering ordering) {
        Job job = new Job(String.format("%016X-%04d", lsn, position), Lsn.of(lsn), null, new byte[0], "application/json",
                Map.of(), null, ordering);
        job.rowId = rowId;
        job.durable = true;
        return job;
    }

    private static Job row(long rowId, long lsn, int position, int rowKey) {
        return queued(rowId, lsn, position, Ordering.row(7, rowKey, rowKey));
    }

    private static Job truncate(long rowId, long lsn) {
        return queued(rowId, lsn, 1, new Ordering(Ordering.Scope.TABLE, 7, 0, 0));
    }

    @Test
    void anOlderChangeOfARowQueuedBehindANewerOneIsAResend() {
        ReplayedRows replayed = new ReplayedRows();
        assertThat(replayed.supersededOnRead(row(1, 0x100, 1, 42), BEFORE)).isFalse();
        assertThat(replayed.supersededOnRead(row(2, 0x300, 2, 42), BEFORE)).isFalse();
        // behind them: an older change of the same row (a resend), one of the same transaction before it, another row's
        assertThat(replayed.supersededOnRead(row(101, 0x200, 1, 42), BEFORE)).isTrue();
        assertThat(replayed.supersededOnRead(row(102, 0x300, 1, 42), BEFORE)).isTrue();
        assertThat(replayed.supersededOnRead(row(103, 0x200, 1, 43), BEFORE)).isFalse();
        // a later change of the row is not
        assertThat(replayed.supersededOnRead(row(104, 0x400, 1, 42), BEFORE)).isFalse();
    }

    @Test
    void aTruncateAndTheRowsOfItsTableAreOrderedTheSameWay() {
        ReplayedRows replayed = new ReplayedRows();
        assertThat(replayed.supersededOnRead(row(1, 0x300, 1, 42), BEFORE)).isFalse();
        // a TRUNCATE delivered before the crash, resent behind a newer insert: it would remove the row
        assertThat(replayed.supersededOnRead(truncate(101, 0x250), BEFORE)).isTrue();
        ReplayedRows other = new ReplayedRows();
        assertThat(other.supersededOnRead(truncate(1, 0x300), BEFORE)).isFalse();
        // an insert delivered before a queued TRUNCATE, resent behind it: the truncated row would come back
        assertThat(other.supersededOnRead(row(101, 0x200, 1, 42), BEFORE)).isTrue();
        assertThat(other.supersededOnRead(row(102, 0x400, 1, 42), BEFORE)).isFalse();
    }

    private static Job rekeyed(long rowId, long lsn, int rowKey) {
        Ordering row = Ordering.row(7, rowKey, rowKey);
        return queued(rowId, lsn, 1, new Ordering(Ordering.Scope.REKEYED, 7, row.key(), row.otherKey()));
    }

    @Test
    void theFirstChangeAfterItsTableWasRekeyedAndTheRowsOfItsTableAreOrderedAsATruncateIs() {
        ReplayedRows replayed = new ReplayedRows();
        // row 1 keyed by FULL (the table) after the ALTER, queued before the crash
        assertThat(replayed.supersededOnRead(rekeyed(1, 0x300, 0), BEFORE)).isFalse();
        // its change keyed by id before the ALTER, delivered before it, resent behind it: another key, the same row
        assertThat(replayed.supersededOnRead(row(101, 0x200, 1, 42), BEFORE)).isTrue();
        assertThat(replayed.supersededOnRead(row(102, 0x400, 1, 0), BEFORE)).isFalse();
        ReplayedRows other = new ReplayedRows();
        assertThat(other.supersededOnRead(row(1, 0x300, 1, 42), BEFORE)).isFalse();
        // a rekeyed change delivered before a newer change of its table, resent behind it
        assertThat(other.supersededOnRead(rekeyed(101, 0x250, 0), BEFORE)).isTrue();
        assertThat(other.supersededOnRead(rekeyed(102, 0x500, 0), BEFORE)).isFalse();
    }

    @Test
    void rowsReadAgainAfterTheCursorMovedBackAreNotResends() {
        ReplayedRows replayed = new ReplayedRows();
        assertThat(replayed.supersededOnRead(row(1, 0x100, 1, 42), BEFORE)).isFalse();
        assertThat(replayed.supersededOnRead(row(2, 0x300, 1, 42), BEFORE)).isFalse();
        // given back (paused) and read again: the same rows, in the same order
        assertThat(replayed.supersededOnRead(row(1, 0x100, 1, 42), BEFORE)).isFalse();
        assertThat(replayed.supersededOnRead(row(2, 0x300, 1, 42), BEFORE)).isFalse();
    }

    @Test
    void rowsOfThisRunAreNotRememberedAndWhatIsOlderThanOneReadIsForgotten() {
        ReplayedRows replayed = new ReplayedRows();
        assertThat(replayed.supersededOnRead(row(1, 0x300, 1, 42), BEFORE)).isFalse();
        assertThat(replayed.supersededOnRead(row(2, 0x600, 1, 43), BEFORE)).isFalse();
        assertThat(replayed.supersededOnRead(row(101, 0x500, 1, 44), BEFORE)).isFalse();
        assertThat(replayed.remembered()).isEqualTo(2);
        replayed.pageRead(); // every resend older than 0x500 was written before it, and read
        assertThat(replayed.remembered()).isEqualTo(1);
        assertThat(replayed.supersededOnRead(row(102, 0x550, 1, 43), BEFORE)).isTrue();
        replayed.clear();
        assertThat(replayed.supersededOnRead(row(103, 0x550, 1, 43), BEFORE)).isFalse();
    }

    @Test
    void onlyTheStreamsEventIdsHaveAPosition() {
        assertThat(ReplayedRows.position("000000000191F380-0001")).isEqualTo(1);
        assertThat(ReplayedRows.position("000000000191F380-123456")).isEqualTo(123_456);
        assertThat(ReplayedRows.position("6f1c2b6e-0000-4000-8000-000000000001-0a1b2c3d4e5f60718293a4b5c6d7e8f9")).isEqualTo(-1);
        assertThat(ReplayedRows.position("queued")).isEqualTo(-1);
        assertThat(ReplayedRows.position("000000000191F380-00x1")).isEqualTo(-1);
    }
}
