package io.walhook.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

import io.walhook.pgoutput.Lsn;

class AckTrackerTest {

    @Test
    void watermarkWaitsForTheOldestUnfinishedTransaction() {
        AckTracker tracker = new AckTracker(Lsn.of(100));
        AckTracker.Ticket first = tracker.register(Lsn.of(150), Lsn.of(200), 2);
        AckTracker.Ticket second = tracker.register(Lsn.of(250), Lsn.of(300), 1);
        tracker.complete(second, 1);
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(100));
        tracker.complete(first, 1);
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(100));
        tracker.complete(first, 1);
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(300));
        assertThat(tracker.idle()).isTrue();
    }

    @Test
    void openTransactionHoldsTheWatermarkEvenWhenItsDeliveriesAreDone() {
        AckTracker tracker = new AckTracker(Lsn.INVALID);
        AckTracker.Ticket open = tracker.open(Lsn.of(10));
        tracker.add(open, 1);
        tracker.complete(open, 1);
        assertThat(tracker.watermark()).isEqualTo(Lsn.INVALID);
        tracker.close(open, Lsn.of(20));
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(20));
    }

    @Test
    void transactionWithoutDeliveriesIsDoneAtCloseButNotBeforeEarlierOnes() {
        AckTracker tracker = new AckTracker(Lsn.INVALID);
        AckTracker.Ticket first = tracker.register(Lsn.of(5), Lsn.of(10), 1);
        tracker.register(Lsn.of(15), Lsn.of(20), 0);
        assertThat(tracker.watermark()).isEqualTo(Lsn.INVALID);
        tracker.complete(first, 1);
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(20));
    }

    @Test
    void completionsOfABatchCountDownEachTransactionByItsOwnRunsAndRunOtherCallbacks() {
        AckTracker tracker = new AckTracker(Lsn.of(100));
        AckTracker.Ticket first = tracker.register(Lsn.of(150), Lsn.of(200), 3);
        AckTracker.Ticket second = tracker.register(Lsn.of(250), Lsn.of(300), 2);
        java.util.concurrent.atomic.AtomicInteger others = new java.util.concurrent.atomic.AtomicInteger();
        // a lane's batch: runs of one transaction, another's, the first's again, and a foreign callback
        AckTracker.completeAll(java.util.List.<Runnable>of(new AckTracker.Completion(tracker, first),
                new AckTracker.Completion(tracker, first), new AckTracker.Completion(tracker, second),
                (Runnable) others::incrementAndGet, new AckTracker.Completion(tracker, second)));
        assertThat(others).hasValue(1);
        assertThat(tracker.watermark()).as("the first still has one delivery out").isEqualTo(Lsn.of(100));
        assertThat(first.toString()).contains("1 outstanding");
        assertThat(second.toString()).contains("0 outstanding");
        AckTracker.completeAll(java.util.List.of(new AckTracker.Completion(tracker, first)));
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(300));
        assertThatThrownBy(() -> AckTracker.completeAll(java.util.List.of(new AckTracker.Completion(tracker, first))))
                .isInstanceOf(IllegalStateException.class);
    }

    @Test
    void comparesPositionsUnsigned() {
        AckTracker tracker = new AckTracker(Lsn.of(0x7FFF_FFFF_FFFF_FFF0L));
        tracker.register(Lsn.of(0x8000_0000_0000_0000L), Lsn.of(0x8000_0000_0000_0010L), 0);
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(0x8000_0000_0000_0010L));
    }

    @Test
    void rejectsOutOfOrderTransactionsAndOvercompletion() {
        AckTracker tracker = new AckTracker(Lsn.INVALID);
        AckTracker.Ticket ticket = tracker.register(Lsn.of(50), Lsn.of(60), 1);
        assertThatThrownBy(() -> tracker.open(Lsn.of(49))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("commit order");
        assertThatThrownBy(() -> tracker.complete(ticket, 2)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> tracker.close(ticket, Lsn.of(70))).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void abandonedTransactionNeverMovesTheWatermarkAndItsResendDoes() {
        AckTracker tracker = new AckTracker(Lsn.of(1));
        AckTracker.Ticket broken = tracker.open(Lsn.of(10));
        tracker.add(broken, 2);
        tracker.abandon(broken);
        AckTracker.Ticket resent = tracker.register(Lsn.of(10), Lsn.of(20), 1);
        tracker.complete(resent, 1);
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(1));
        tracker.complete(broken, 2);
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(20));
        assertThat(tracker.idle()).isTrue();
    }

    /**
     * A transaction abandoned (the connection broke in its middle) may never come again: a standby
     * promoted before it received it has another history, whose next transaction commits below it.
     * Its commit position stayed the one every next transaction had to follow, and the reader
     * stopped at the new server's first transaction at every reconnect, for good.
     */
    @Test
    void aTransactionAbandonedDoesNotOrderTheNextOneOpened() {
        AckTracker tracker = new AckTracker(Lsn.of(1));
        AckTracker.Ticket before = tracker.register(Lsn.of(5), Lsn.of(6), 0);
        AckTracker.Ticket broken = tracker.open(Lsn.of(500));
        tracker.add(broken, 1);
        tracker.abandon(broken);
        AckTracker.Ticket other = tracker.open(Lsn.of(460)); // the promoted standby's history
        tracker.close(other, Lsn.of(470));
        assertThatThrownBy(() -> tracker.open(Lsn.of(5))).as("still after the last one closed before it")
                .isInstanceOf(IllegalArgumentException.class);
        tracker.complete(broken, 1);
        assertThat(tracker.watermark()).isEqualTo(Lsn.of(470));
        assertThat(before.commitLsn()).isEqualTo(Lsn.of(5));
    }
}
