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

    /**
     * After a failover to a server behind the old one, the stream resumes from a position no queued
     * row is past (-1, unsigned): the new history's changes come with lower positions than the old
     * history's queued ones, and were dropped as resends of them.
     */
    @Test
    void noQueuedRowIsRememberedWhenTheStreamResumesInAnotherHistory() {
        ReplayedRows replayed = new ReplayedRows();
        assertThat(replayed.supersededOnRead(row(1, 0x900, 1, 42), BEFORE, -1L)).isFalse();
        assertThat(replayed.supersededOnRead(row(101, 0x200, 1, 42), BEFORE, -1L)).as("the new history's change").isFalse();
        ReplayedRows sameHistory = new ReplayedRows();
        assertThat(sameHistory.supersededOnRead(row(1, 0x900, 1, 42), BEFORE, 0x100)).isFalse();
        assertThat(sameHistory.supersededOnRead(row(101, 0x200, 1, 42), BEFORE, 0x100)).as("a resend").isTrue();
    }

    @Test
    void noRowQueuedInAnEarlierHistoryIsRememberedInALaterRun() {
        // a later start: the checkpoint (0x150) and rows 101 and up are the new history's, written before this run
        ReplayedRows replayed = new ReplayedRows();
        assertThat(replayed.supersededOnRead(row(1, 0x900, 1, 42), BEFORE + 200, 0x150, 50)).isFalse();
        assertThat(replayed.supersededOnRead(row(101, 0x200, 1, 42), BEFORE + 200, 0x150, 50))
                .as("the new history's change, queued behind the old history's").isFalse();
        assertThat(replayed.supersededOnRead(row(102, 0x300, 1, 42), BEFORE + 200, 0x150, 50)).isFalse();
        assertThat(replayed.supersededOnRead(row(201, 0x250, 1, 42), BEFORE + 300, 0x150, 50))
                .as("a resend of the new history's, older than its change read before").isTrue();
        ReplayedRows unmarked = new ReplayedRows();
        assertThat(unmarked.supersededOnRead(row(1, 0x900, 1, 42), BEFORE + 200, 0x150, 0)).isFalse();
        assertThat(unmarked.supersededOnRead(row(101, 0x200, 1, 42), BEFORE + 200, 0x150, 0))
                .as("without the mark, taken for a resend").isTrue();
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

    /**
     * A lane reading past the changes held back behind a refused one reads rows of this run beyond
     * them before it reads them: a resend among them, older than a change of its row read before,
     * is only read after a row of this run made everything older than it forgotten. Read again
     * from earlier, nothing is forgotten for that row.
     */
    @Test
    void rowsReadAgainFromEarlierAreComparedWithWhatWasReadBeforeThem() {
        ReplayedRows replayed = new ReplayedRows();
        assertThat(replayed.supersededOnRead(row(1, 0x300, 1, 42), BEFORE)).isFalse();
        // row 50 (a resend of row 42's older change) read past; a row of this run read beyond it
        assertThat(replayed.supersededOnRead(row(101, 0x500, 1, 44), BEFORE)).isFalse();
        replayed.readAgainFromEarlier();
        assertThat(replayed.supersededOnRead(row(50, 0x200, 1, 42), BEFORE)).isTrue();
        replayed.pageRead();
        assertThat(replayed.remembered()).as("nothing forgotten for a row read beyond those read again").isEqualTo(1);
        // another resend of the row, on the next page read again
        assertThat(replayed.supersededOnRead(row(60, 0x250, 1, 42), BEFORE)).isTrue();
    }

    /**
     * A queue parked while a destination was down holds changes of many more rows than the 10,000
     * keys remembered before: the resend of an older change of a row past them was delivered after
     * the newer one queued before the crash, leaving the receiver with the older state.
     */
    @Test
    void aResendBehindTheChangesOfTensOfThousandsOfRowsIsStillFound() {
        ReplayedRows replayed = new ReplayedRows();
        long before = 30_000;
        for (int row = 1; row <= 20_000; row++) {
            assertThat(replayed.supersededOnRead(row(row, 0x10_000 + row, 1, row), before)).isFalse();
        }
        assertThat(replayed.supersededOnRead(row(20_001, 0x90_000, 1, 777_777), before)).isFalse();
        // the stream's resends, behind them: an older change of the last row, and one of a row never queued
        assertThat(replayed.supersededOnRead(row(30_001, 0x80_000, 1, 777_777), before)).isTrue();
        assertThat(replayed.supersededOnRead(row(30_002, 0x80_000, 2, 888_888), before)).isFalse();
        assertThat(replayed.takeUnremembered()).isZero();
    }

    /** Past the limit, a row is not remembered, and the lane learns of it (it says so in its log). */
    @Test
    void rowsPastTheLimitAreCountedAsNotRemembered() {
        ReplayedRows replayed = new ReplayedRows();
        long before = ReplayedRows.LIMIT + 10L;
        for (int row = 1; row <= ReplayedRows.LIMIT + 3; row++) {
            replayed.supersededOnRead(row(row, 0x10_000 + row, 1, row), before);
        }
        assertThat(replayed.remembered()).isEqualTo(ReplayedRows.LIMIT);
        assertThat(replayed.takeUnremembered()).isEqualTo(3);
        assertThat(replayed.takeUnremembered()).isZero();
    }

    /**
     * The stream resends only what committed at or after the position it resumed from: a queued
     * change older than that precedes every resend, and is not remembered (a queue of millions of
     * rows parked long before the crash costs nothing here).
     */
    @Test
    void rowsThatCommittedBeforeTheStreamResumedAreNotRemembered() {
        ReplayedRows replayed = new ReplayedRows();
        long resumedFrom = 0x200;
        assertThat(replayed.supersededOnRead(row(1, 0x100, 1, 42), BEFORE, resumedFrom)).isFalse();
        assertThat(replayed.supersededOnRead(row(2, 0x300, 1, 43), BEFORE, resumedFrom)).isFalse();
        assertThat(replayed.remembered()).isEqualTo(1);
        assertThat(replayed.supersededOnRead(row(101, 0x250, 1, 43), BEFORE, resumedFrom)).isTrue();
        assertThat(replayed.supersededOnRead(row(102, 0x250, 2, 42), BEFORE, resumedFrom)).isFalse();
    }

    /** The marks in arrays answer as a map of every key's newest change does, through growth and forgetting. */
    @Test
    void theMarksAnswerAsAMapOfEachKeysNewestChange() {
        java.util.Random random = new java.util.Random(18);
        ReplayedRows.RowMarks marks = new ReplayedRows.RowMarks();
        Map<Long, long[]> model = new java.util.HashMap<>();
        long rowId = 0;
        for (int step = 0; step < 200_000; step++) {
            long key = random.nextInt(5_000) * 0x1_0000_0001L;
            long lsn = random.nextInt(1_000_000);
            long seq = random.nextInt(4);
            if (random.nextInt(3) == 0) {
                long[] seen = model.get(key);
                boolean newer = seen != null && seen[2] < rowId + 1
                        && (seen[0] > lsn || seen[0] == lsn && seen[1] > seq);
                assertThat(marks.newer(key, lsn, seq, rowId + 1)).as("step " + step).isEqualTo(newer);
            } else {
                rowId++;
                assertThat(marks.remember(key, lsn, seq, rowId)).isTrue();
                long[] seen = model.get(key);
                if (seen == null || lsn > seen[0] || lsn == seen[0] && seq > seen[1]) {
                    model.put(key, new long[] {lsn, seq, rowId});
                }
            }
            if (step % 20_000 == 19_999) {
                long below = random.nextInt(1_000_000);
                marks.forgetBelow(below);
                model.values().removeIf(seen -> seen[0] < below);
            }
            assertThat(marks.size()).isEqualTo(model.size());
        }
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
