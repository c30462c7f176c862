package io.walhook.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** The hand-off between the reader, the routing thread and the lanes: order, waiting, back-pressure. */
class HandOffQueueTest {

    private static final Duration LIVENESS = Duration.ofSeconds(20);

    @Test
    void itemsComeOutInTheOrderTheyWentIn() throws Exception {
        HandOffQueue<Integer> queue = new HandOffQueue<>(4);
        List<Integer> out = new ArrayList<>();
        CompletableFuture<Void> producer = CompletableFuture.runAsync(() -> {
            try {
                for (int i = 0; i < 1000; i++) {
                    queue.put(i); // blocks whenever the 4 places are taken
                }
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        assertTimeoutPreemptively(LIVENESS, () -> {
            while (out.size() < 1000) {
                out.add(queue.take());
                queue.drainTo(out, 3);
            }
        });
        producer.get(10, TimeUnit.SECONDS);
        assertThat(out).hasSize(1000).isSorted();
    }

    /**
     * A producer interrupted while it waits for room, some of its items already added, learns how
     * many went in: those are the consumer's to complete. It heard only the interrupt, and counted
     * them as never queued (completed them itself): each was completed twice.
     */
    @Test
    void anOfferInterruptedAfterAddingSomeSaysHowManyWentIn() throws Exception {
        HandOffQueue<Integer> queue = new HandOffQueue<>(2);
        java.util.concurrent.atomic.AtomicInteger added = new java.util.concurrent.atomic.AtomicInteger(-1);
        java.util.concurrent.atomic.AtomicBoolean interrupted = new java.util.concurrent.atomic.AtomicBoolean();
        Thread producer = new Thread(() -> {
            try {
                added.set(queue.offerAll(List.of(1, 2, 3, 4, 5), 0, 60, TimeUnit.SECONDS));
                interrupted.set(Thread.currentThread().isInterrupted());
            } catch (InterruptedException e) {
                interrupted.set(true); // nothing added: the index it was called with stands
            }
        });
        producer.start();
        org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(30))
                .until(() -> queue.size() == 2 && producer.getState() == Thread.State.TIMED_WAITING);
        producer.interrupt();
        producer.join(30_000);
        assertThat(added.get()).as("the index of the first item not added").isEqualTo(2);
        assertThat(interrupted.get()).as("the interrupt kept for the caller").isTrue();
    }

    @Test
    void aLaneThatCannotTakeLearnsWhenItsQueueFillsOrItsWaitIsOver() throws Exception {
        HandOffQueue<Integer> queue = new HandOffQueue<>(3);
        queue.put(1);
        long start = System.nanoTime();
        assertThat(queue.awaitFull(start + TimeUnit.MILLISECONDS.toNanos(100))).as("one of three places taken").isFalse();
        assertThat(System.nanoTime() - start).as("waited its time").isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(100));

        CompletableFuture<Boolean> full = CompletableFuture.supplyAsync(() -> {
            try {
                return queue.awaitFull(System.nanoTime() + TimeUnit.SECONDS.toNanos(60));
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        queue.put(2);
        Thread.sleep(200);
        assertThat(full).as("two of three").isNotDone();
        queue.put(3);
        assertThat(full.get(LIVENESS.toSeconds(), TimeUnit.SECONDS)).isTrue();
        assertThat(queue.awaitFull(System.nanoTime())).as("already full: no wait").isTrue();
        assertThat(queue.size()).as("nothing taken").isEqualTo(3);
    }

    @Test
    void aLaneWaitingToFillItsBatchTakesItWhenFullOrWhenItsWaitIsOver() throws Exception {
        HandOffQueue<Integer> queue = new HandOffQueue<>(100);
        List<Integer> batch = new ArrayList<>();
        CompletableFuture<Integer> taken = CompletableFuture.supplyAsync(() -> {
            try {
                return queue.drainWhenAtLeast(batch, 5, 10, System.nanoTime() + TimeUnit.SECONDS.toNanos(60));
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        for (int i = 0; i < 4; i++) {
            queue.put(i);
        }
        Thread.sleep(200);
        assertThat(taken).as("4 of the 5 it waits for").isNotDone();
        queue.put(4);
        assertThat(taken.get(LIVENESS.toSeconds(), TimeUnit.SECONDS)).isEqualTo(5);
        assertThat(batch).containsExactly(0, 1, 2, 3, 4);

        batch.clear();
        queue.put(5);
        // its wait is over: it takes what there is
        assertThat(queue.drainWhenAtLeast(batch, 10, 10, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(50))).isEqualTo(1);
        assertThat(batch).containsExactly(5);
        assertThat(queue.poll(10, TimeUnit.MILLISECONDS)).isNull();
    }

    @Test
    void aConsumerWaitingForMoreThanFitsIsWokenWhenTheQueueIsFullAndAProducerWaits() throws Exception {
        HandOffQueue<Integer> queue = new HandOffQueue<>(3);
        List<Integer> batch = new ArrayList<>();
        CompletableFuture<Void> producer = CompletableFuture.runAsync(() -> {
            try {
                for (int i = 0; i < 5; i++) {
                    queue.put(i);
                }
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        // waits for 500 with a deadline a minute away: a full queue is all that can come
        assertTimeoutPreemptively(LIVENESS, () -> {
            queue.drainWhenAtLeast(batch, 500, 500, System.nanoTime() + TimeUnit.SECONDS.toNanos(60));
            queue.drainWhenAtLeast(batch, 2, 500, System.nanoTime() + TimeUnit.SECONDS.toNanos(60));
        });
        producer.get(10, TimeUnit.SECONDS);
        assertThat(batch).containsExactly(0, 1, 2, 3, 4);
    }

    @Test
    void offerAllAddsWhatFitsWithinItsWaitAndSaysWhereItStopped() throws Exception {
        HandOffQueue<String> queue = new HandOffQueue<>(2);
        List<String> items = List.of("a", "b", "c", "d");
        assertThat(queue.offerAll(items, 0, 20, TimeUnit.MILLISECONDS)).isEqualTo(2);
        assertThat(queue.remainingCapacity()).isZero();
        assertThat(queue.take()).isEqualTo("a");
        assertThat(queue.offerAll(items, 2, 20, TimeUnit.MILLISECONDS)).isEqualTo(3);
        List<String> rest = new ArrayList<>();
        queue.drainTo(rest, 10);
        assertThat(rest).containsExactly("b", "c");
        assertThat(queue.size()).isZero();
    }

    @Test
    void aQueueWithoutRoomIsRefused() {
        assertThatThrownBy(() -> new HandOffQueue<>(0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("capacity");
    }

    @Test
    void aQueueBoundedInBytesHoldsBackTheItemThatWouldPassTheLimitAndLetsABigOneAloneThrough() throws Exception {
        HandOffQueue<Integer> queue = new HandOffQueue<>(100, 10, Integer::longValue);
        queue.put(4);
        queue.put(5);
        assertThat(queue.bytes()).isEqualTo(9);
        assertThat(queue.offerAll(List.of(2), 0, 10, TimeUnit.MILLISECONDS)).as("4 + 5 + 2 is more than 10").isZero();
        assertThat(queue.offerAll(List.of(1), 0, 10, TimeUnit.MILLISECONDS)).as("4 + 5 + 1 fits").isEqualTo(1);
        CompletableFuture<Void> big = CompletableFuture.runAsync(() -> {
            try {
                queue.put(50); // bigger than the limit: waits for an empty queue, then goes alone
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        List<Integer> out = new ArrayList<>();
        // a consumer waiting for more items than will come is woken by the waiting producer
        assertTimeoutPreemptively(LIVENESS, () -> queue.drainWhenAtLeast(out, 50, 100,
                System.nanoTime() + TimeUnit.SECONDS.toNanos(60)));
        assertThat(out).containsExactly(4, 5, 1);
        big.get(10, TimeUnit.SECONDS);
        assertThat(queue.bytes()).isEqualTo(50);
        assertThat(queue.take()).isEqualTo(50);
        assertThat(queue.bytes()).isZero();
    }

    @Test
    void aLaneLearnsTheQueueIsFullWhenAProducerWaitsForBytes() throws Exception {
        HandOffQueue<Integer> queue = new HandOffQueue<>(100, 10, Integer::longValue);
        queue.put(8);
        CompletableFuture<Boolean> full = CompletableFuture.supplyAsync(() -> {
            try {
                return queue.awaitFull(System.nanoTime() + TimeUnit.SECONDS.toNanos(60));
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        CompletableFuture.runAsync(() -> {
            try {
                queue.put(8);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        assertThat(full.get(20, TimeUnit.SECONDS)).isTrue();
    }
}
