package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;

import org.junit.jupiter.api.Test;

import io.walhook.pgoutput.Lsn;

/** Which rows read from a durable queue are resends of changes older than one of their row read before them. */
class ReplayedRowsTest {

    private static Job queued(long rowId, long lsn, int position, int rowKey) {
        Job job = new Job(String.format("%016X-%04d", lsn, position), Lsn.of(lsn), null, new byte[0], "application/json",
                Map.of(), null, Ordering.row(7, rowKey, rowKey));
        job.rowId = rowId;
        job.durable = true;
        return job;
    }

    @Test
    void anOlderChangeOfARowQueuedBehindANewerOneIsAResend() {
        ReplayedRows replayed = new ReplayedRows();
        assertThat(replayed.supersededOnRead(queued(1, 0x100, 1, 42))).isFalse();
        assertThat(replayed.supersededOnRead(queued(2, 0x300, 2, 42))).isFalse();
        // behind them: an older change of the same row (a resend), one of the same transaction before it, another row's
        assertThat(replayed.supersededOnRead(queued(3, 0x200, 1, 42))).isTrue();
        assertThat(replayed.supersededOnRead(queued(4, 0x300, 1, 42))).isTrue();
        assertThat(replayed.supersededOnRead(queued(5, 0x200, 1, 43))).isFalse();
        // a later change of the row is not
        assertThat(replayed.supersededOnRead(queued(6, 0x400, 1, 42))).isFalse();
    }

    @Test
    void rowsReadAgainAfterTheCursorMovedBackAreNotResends() {
        ReplayedRows replayed = new ReplayedRows();
        assertThat(replayed.supersededOnRead(queued(1, 0x100, 1, 42))).isFalse();
        assertThat(replayed.supersededOnRead(queued(2, 0x300, 1, 42))).isFalse();
        // given back (paused) and read again: the same rows, in the same order
        assertThat(replayed.supersededOnRead(queued(1, 0x100, 1, 42))).isFalse();
        assertThat(replayed.supersededOnRead(queued(2, 0x300, 1, 42))).isFalse();
    }

    @Test
    void rowsTheStreamIsPastAreNotRememberedAndNoneOnceTheLaneDeliversDirectly() {
        ReplayedRows replayed = new ReplayedRows();
        replayed.streamed(Lsn.of(0x500));
        assertThat(replayed.supersededOnRead(queued(1, 0x300, 1, 42))).isFalse();
        assertThat(replayed.remembered()).isZero();
        assertThat(replayed.supersededOnRead(queued(2, 0x600, 1, 43))).isFalse();
        assertThat(replayed.remembered()).isEqualTo(1);
        replayed.clear();
        assertThat(replayed.supersededOnRead(queued(3, 0x550, 1, 43))).isFalse();
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
