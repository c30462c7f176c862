package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import org.junit.jupiter.api.Test;

import io.walhook.pgoutput.Lsn;

/**
 * The queue against the rule it implements, checked the slow way: a job may go once no earlier
 * unfinished job it {@link Ordering#follows} is left, except one earlier in its own batch.
 */
class KeyedQueueTest {

    private int arrivals;

    private Job job(Ordering ordering) {
        int n = ++arrivals;
        return new Job(String.format("%016X-%04d", n, 0), Lsn.of(n), Instant.EPOCH, new byte[0], "application/json",
                Map.of(), null, ordering);
    }

    private static Ordering row(long table, int key) {
        return Ordering.row(table, key, key);
    }

    /** What keeps a lane from reading past held-back changes: any job ordered against everything not finished yet. */
    @Test
    void itHoldsABarrierUntilEveryJobOrderedAgainstEverythingIsFinished() {
        KeyedQueue queue = new KeyedQueue();
        Job first = job(Ordering.EVERYTHING);
        queue.add(job(row(1, 10)));
        queue.add(first);
        Job second = job(Ordering.EVERYTHING);
        queue.add(second);
        assertThat(queue.holdsBarrier()).isTrue();
        queue.take(10, false).forEach(queue::finish); // the row's change
        List<Job> taken = queue.take(10, false);
        assertThat(taken).containsExactly(first);
        queue.finish(first);
        assertThat(queue.holdsBarrier()).as("the second is left").isTrue();
        assertThat(queue.take(10, false)).containsExactly(second);
        assertThat(queue.removeUntaken()).isEmpty();
        assertThat(queue.holdsBarrier()).as("taken, it stays").isTrue();
        queue.finish(second);
        assertThat(queue.holdsBarrier()).isFalse();
    }

    @Test
    void aFailingRowHoldsBackOnlyItsOwnLaterChanges() {
        KeyedQueue queue = new KeyedQueue();
        Job a1 = job(row(1, 10));
        Job b1 = job(row(1, 20));
        Job a2 = job(row(1, 10));
        Job c1 = job(row(2, 10));
        List.of(a1, b1, a2, c1).forEach(queue::add);
        assertThat(queue.take(10, false)).containsExactly(a1, b1, c1);
        assertThat(queue.heldBack()).isEqualTo(1);
        // a1 fails and is retried: a2 waits, b1 and c1 go through and new rows flow
        queue.finish(b1);
        queue.finish(c1);
        Job b2 = job(row(1, 20));
        queue.add(b2);
        assertThat(queue.take(10, false)).containsExactly(b2);
        queue.finish(a1);
        assertThat(queue.take(10, false)).containsExactly(a2);
    }

    private Job read(Ordering ordering) {
        Job job = job(ordering);
        job.background = true;
        return job;
    }

    @Test
    void aBackfillsRowsGoAfterLiveChangesOfOtherRowsButInOrderWithTheirOwn() {
        KeyedQueue queue = new KeyedQueue();
        Job read1 = read(row(1, 1));
        Job read2 = read(row(1, 2));
        Job read3 = read(row(1, 3));
        Job live9 = job(row(1, 9));
        Job live2 = job(row(1, 2)); // row 2's change after its read: it waits for it
        List.of(read1, read2, read3, live9, live2).forEach(queue::add);
        assertThat(queue.firstReady()).isSameAs(live9);
        assertThat(queue.take(2, false)).as("the live change first, then reads in their order").containsExactly(live9,
                read1);
        assertThat(queue.heldBack()).isEqualTo(1);
        assertThat(queue.take(10, false)).containsExactly(read2, read3);
        queue.finish(read2);
        assertThat(queue.take(10, false)).containsExactly(live2);
        Job live5 = job(row(1, 5));
        Job read5 = read(row(1, 5)); // a read after a live change of its row waits for it too
        queue.add(live5);
        queue.add(read5);
        assertThat(queue.take(10, false)).containsExactly(live5);
        queue.finish(live5);
        assertThat(queue.take(10, false)).containsExactly(read5);
    }

    /**
     * The oldest live change (not a backfill's row), however many rows lie before it: what a lane
     * counts how long its events waited by. Looked for among the oldest few, it was missed behind a
     * backfill's chunks, and live changes waited for a slow destination with no bound.
     */
    @Test
    void theOldestLiveChangeIsKnownBehindABackfillsRows() {
        KeyedQueue queue = new KeyedQueue();
        List<Job> reads = new java.util.ArrayList<>();
        for (int i = 0; i < 3000; i++) {
            reads.add(read(row(1, 100 + i)));
        }
        reads.forEach(queue::add);
        assertThat(queue.oldestLive()).isNull();
        Job live1 = job(row(1, 1));
        Job read2 = read(row(1, 2));
        Job live3 = job(row(1, 3));
        List.of(live1, read2, live3).forEach(queue::add);
        assertThat(queue.oldest()).isSameAs(reads.get(0));
        assertThat(queue.oldestLive()).isSameAs(live1);
        assertThat(queue.take(1, false)).containsExactly(live1);
        queue.finish(live1);
        assertThat(queue.oldestLive()).as("past the read between them").isSameAs(live3);
        assertThat(queue.take(1, false)).containsExactly(live3);
        queue.finish(live3);
        assertThat(queue.oldestLive()).isNull();
        Job live4 = job(row(1, 4));
        queue.add(live4);
        assertThat(queue.oldestLive()).isSameAs(live4);
        assertThat(queue.removeUntaken()).contains(live4);
        assertThat(queue.oldestLive()).isNull();
    }

    @Test
    void aTruncateWaitsForItsTableAndTheTableWaitsForIt() {
        KeyedQueue queue = new KeyedQueue();
        Job row = job(row(1, 10));
        Job other = job(row(2, 10));
        Job truncate = job(new Ordering(Ordering.Scope.TABLE, 1, 0, 0));
        Job after = job(row(1, 30));
        Job message = job(new Ordering(Ordering.Scope.TABLE, Ordering.MESSAGES, 0, 0));
        List.of(row, other, truncate, after, message).forEach(queue::add);
        assertThat(queue.take(10, false)).containsExactly(row, other, message);
        queue.finish(row);
        assertThat(queue.take(10, false)).containsExactly(truncate);
        queue.finish(truncate);
        assertThat(queue.take(10, false)).containsExactly(after);
    }

    @Test
    void theFirstChangeAfterItsTableWasRekeyedWaitsForItsTableAndTheTableWaitsForIt() {
        KeyedQueue queue = new KeyedQueue();
        Job before = job(row(1, 10)); // row 10 keyed by id
        Job otherTable = job(row(2, 10));
        Ordering full = row(1, 99); // the same row keyed by its table (REPLICA IDENTITY FULL)
        Job rekeyed = job(new Ordering(Ordering.Scope.REKEYED, 1, full.key(), full.otherKey()));
        Job after = job(row(1, 99));
        List.of(before, otherTable, rekeyed, after).forEach(queue::add);
        assertThat(queue.take(10, false)).containsExactly(before, otherTable);
        queue.finish(before);
        assertThat(queue.take(10, false)).containsExactly(rekeyed);
        queue.finish(rekeyed);
        assertThat(queue.take(10, false)).containsExactly(after);
    }

    @Test
    void aKeyChangingUpdateOrdersBothKeys() {
        KeyedQueue queue = new KeyedQueue();
        Job oldKey = job(row(1, 1));
        Job newKey = job(row(1, 2));
        Job rekey = job(Ordering.row(1, 1, 2));
        Job laterNew = job(row(1, 2));
        List.of(oldKey, newKey, rekey, laterNew).forEach(queue::add);
        assertThat(queue.take(10, false)).containsExactly(oldKey, newKey);
        queue.finish(newKey);
        assertThat(queue.hasReady()).as("the old key's change is still under way").isFalse();
        queue.finish(oldKey);
        assertThat(queue.take(10, false)).containsExactly(rekey);
        queue.finish(rekey);
        assertThat(queue.take(10, false)).containsExactly(laterNew);
    }

    @Test
    void aBatchCarriesARunOfOneRowInOrder() {
        KeyedQueue queue = new KeyedQueue();
        Job a1 = job(row(1, 10));
        Job a2 = job(row(1, 10));
        Job b1 = job(row(1, 20));
        Job a3 = job(row(1, 10));
        List.of(a1, a2, b1, a3).forEach(queue::add);
        assertThat(queue.take(10, true)).containsExactly(a1, a2, a3, b1);
        Job a4 = job(row(1, 10));
        queue.add(a4);
        assertThat(queue.hasReady()).as("the batch is under way").isFalse();
        queue.finish(a1);
        queue.finish(a2);
        assertThat(queue.hasReady()).isFalse();
        queue.finish(a3);
        assertThat(queue.take(10, true)).containsExactly(a4);
    }

    @Test
    void removingWhatWasNotTakenKeepsTheTakenInOrderAheadOfNewArrivals() {
        KeyedQueue queue = new KeyedQueue();
        Job a1 = job(row(1, 10));
        Job a2 = job(row(1, 10));
        Job b1 = job(row(1, 20));
        List.of(a1, a2, b1).forEach(queue::add);
        assertThat(queue.take(1, false)).containsExactly(a1);
        assertThat(queue.removeUntaken()).containsExactly(a2, b1);
        assertThat(queue.size()).isEqualTo(1);
        Job a3 = job(row(1, 10));
        Job c1 = job(row(1, 30));
        queue.add(a3);
        queue.add(c1);
        assertThat(queue.take(10, false)).containsExactly(c1);
        queue.finish(a1);
        assertThat(queue.take(10, false)).containsExactly(a3);
    }

    /** Random orderings, batches, deliveries and removals, against the rule checked job by job. */
    @Test
    void followsTheRuleUnderRandomWork() {
        for (long seed = 1; seed <= 300; seed++) {
            Random random = new Random(seed);
            KeyedQueue queue = new KeyedQueue();
            List<Job> unfinished = new ArrayList<>();
            List<List<Job>> underWay = new ArrayList<>();
            for (int step = 0; step < 400; step++) {
                int action = random.nextInt(10);
                if (action < 5) {
                    Job job = job(randomOrdering(random));
                    queue.add(job);
                    unfinished.add(job);
                } else if (action < 8) {
                    boolean chain = random.nextBoolean();
                    List<Job> batch = queue.take(1 + random.nextInt(5), chain);
                    for (int i = 0; i < batch.size(); i++) {
                        Job job = batch.get(i);
                        List<Job> before = batch.subList(0, i);
                        for (Job earlier : unfinished) {
                            if (earlier == job) {
                                break;
                            }
                            assertThat(!job.ordering.follows(earlier.ordering) || before.contains(earlier))
                                    .as("seed %d: %s taken before %s it follows", seed, job, earlier).isTrue();
                        }
                    }
                    if (!batch.isEmpty()) {
                        underWay.add(batch);
                    }
                } else if (action < 9 && !underWay.isEmpty()) {
                    List<Job> batch = underWay.remove(random.nextInt(underWay.size()));
                    batch.forEach(queue::finish);
                    unfinished.removeAll(batch);
                } else if (random.nextInt(8) == 0) {
                    List<Job> removed = queue.removeUntaken();
                    List<Job> expected = unfinished.stream().filter(j -> underWay.stream().noneMatch(b -> b.contains(j)))
                            .toList();
                    assertThat(removed).as("seed %d", seed).containsExactlyElementsOf(expected);
                    unfinished.removeAll(removed);
                }
                // nothing free is left waiting: the ready jobs are exactly those nothing earlier holds
                Set<Job> takenJobs = new HashSet<>();
                underWay.forEach(takenJobs::addAll);
                Set<Job> free = new HashSet<>();
                for (int i = 0; i < unfinished.size(); i++) {
                    Job job = unfinished.get(i);
                    if (takenJobs.contains(job)) {
                        continue;
                    }
                    boolean held = false;
                    for (int e = 0; e < i && !held; e++) {
                        held = job.ordering.follows(unfinished.get(e).ordering);
                    }
                    if (!held) {
                        free.add(job);
                    }
                }
                assertThat(new HashSet<>(queue.readyJobs())).as("seed %d step %d", seed, step).isEqualTo(free);
                assertThat(queue.size()).isEqualTo(unfinished.size());
            }
        }
    }

    private static Ordering randomOrdering(Random random) {
        int kind = random.nextInt(40);
        long table = 1 + random.nextInt(3);
        if (kind == 0) {
            return Ordering.EVERYTHING;
        }
        if (kind < 3) {
            return new Ordering(Ordering.Scope.TABLE, kind == 1 ? Ordering.MESSAGES : table, 0, 0);
        }
        int key = random.nextInt(6);
        if (kind == 3) {
            Ordering row = Ordering.row(table, key, key);
            return new Ordering(Ordering.Scope.REKEYED, table, row.key(), row.otherKey());
        }
        return kind < 6 ? Ordering.row(table, key, random.nextInt(6)) : Ordering.row(table, key, key);
    }
}
