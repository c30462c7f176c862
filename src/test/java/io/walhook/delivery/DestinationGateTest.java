package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

import org.junit.jupiter.api.Test;

/**
 * The places of one destination shared by lanes: never more under way than its limit, handed on in
 * the order asked, to lanes holding none before lanes holding some.
 */
class DestinationGateTest {

    @Test
    void placesUpToTheLimitThenWaitersInTheOrderTheyAsked() {
        DestinationGate gate = new DestinationGate(2);
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> a = g -> grants.add("a");
        Consumer<DestinationGate> b = g -> grants.add("b");
        Consumer<DestinationGate> c = g -> grants.add("c");
        assertThat(gate.tryEnter(a)).isTrue();
        assertThat(gate.tryEnter(b)).isTrue();
        assertThat(gate.tryEnter(c)).isFalse();
        assertThat(gate.tryEnter(a)).isFalse();
        assertThat(gate.tryEnter(c)).as("a lane waits once").isFalse();
        assertThat(gate.waiting()).isEqualTo(2);

        gate.leave(b); // handed straight to c, the first to wait: still two under way
        assertThat(grants).containsExactly("c");
        assertThat(gate.inUse()).isEqualTo(2);
        gate.leave(a); // a holds none now, and waits for one
        assertThat(grants).containsExactly("c", "a");
        assertThat(gate.waiting()).isZero();
        // nobody waits: a place is free, and a new lane takes it without waiting
        gate.leave(c);
        assertThat(gate.inUse()).isEqualTo(1);
        assertThat(gate.tryEnter(b)).isTrue();
    }

    /**
     * A tenant whose request failed, holding no place, behind a drain of tenants that always wait
     * for their first: the first place that frees once it has waited {@link DestinationGate#STARVED_AFTER}
     * is its. It waited as a lane holding some for as long as any lane waited for its first place,
     * and, holding none, could not succeed to be judged afresh: its every row waited out the drain.
     * Lanes so rescued hold no more than the kept places (one of 8) at once.
     */
    @Test
    void aLaneThatFailedAndHoldsNoneIsNotStarvedByADrainOfLanesWaitingForTheirFirst() {
        Drain drain = new Drain(name -> true);
        Consumer<DestinationGate> failed = drain.lane("failed");
        Consumer<DestinationGate> failedToo = drain.lane("failed too");
        assertThat(drain.gate.tryEnter(failed, true)).isFalse();
        assertThat(drain.gate.tryEnter(failedToo, true)).isFalse();
        // the drain: a newcomer waits for its first place, and each place that frees is a newcomer's
        for (int i = 0; i < 50; i++) {
            assertThat(drain.gate.tryEnter(drain.lane("newcomer"))).isFalse();
            drain.gate.leave(drain.holders.poll());
            drain.now.addAndGet(java.time.Duration.ofMillis(10).toNanos());
        }
        assertThat(drain.grants).as("before either waited a second").containsOnly("newcomer");

        drain.now.addAndGet(DestinationGate.STARVED_AFTER.toNanos());
        assertThat(drain.gate.tryEnter(drain.lane("newcomer"))).isFalse();
        drain.gate.leave(drain.holders.poll());
        assertThat(drain.grants.get(drain.grants.size() - 1)).isEqualTo("failed");
        // the other waits while the rescued one holds its place (one of 8 kept): newcomers meanwhile
        drain.gate.leave(drain.holders.poll());
        assertThat(drain.grants.get(drain.grants.size() - 1)).isEqualTo("newcomer");
        Consumer<DestinationGate> rescued = drain.holders.stream().filter(h -> h == failed).findFirst().orElseThrow();
        drain.holders.remove(rescued);
        drain.gate.leave(rescued, true);
        assertThat(drain.grants.get(drain.grants.size() - 1)).isEqualTo("failed too");
        assertThat(drain.gate.inUse()).isEqualTo(8);
    }

    /**
     * A rescued lane whose request still hangs, handing back a second place it did not use, is still
     * counted as holding a rescued place: another starved lane waits. Counted as delivered, the hand-
     * back let lanes whose endpoints hang take more than their share of the kept places.
     */
    @Test
    void aRescuedLaneHandingBackAPlaceItDidNotUseIsStillCounted() {
        Drain drain = new Drain(name -> !name.startsWith("hanging"));
        Consumer<DestinationGate> hanging = drain.lane("hanging");
        Consumer<DestinationGate> other = drain.lane("hanging too");
        assertThat(drain.gate.tryEnter(hanging, true)).isFalse();
        drain.now.addAndGet(DestinationGate.STARVED_AFTER.toNanos());
        assertThat(drain.gate.tryEnter(drain.lane("newcomer"))).isFalse();
        drain.gate.leave(drain.holders.poll());
        assertThat(drain.grants).containsExactly("hanging"); // rescued: its probe hangs
        // it asks for one more place, gets it when two healthy ones end with nobody else waiting, and hands it back
        assertThat(drain.gate.tryEnter(hanging, true)).isFalse();
        drain.gate.leave(drain.holders.poll()); // the newcomer waiting for its first
        drain.gate.leave(drain.holders.poll());
        drain.gate.leave(drain.holders.poll());
        assertThat(drain.grants).containsExactly("hanging", "newcomer", "hanging");
        Consumer<DestinationGate> filling = drain.lane("healthy");
        assertThat(drain.gate.tryEnter(filling)).as("the place left free").isTrue();
        drain.holders.add(filling);
        // another tenant whose endpoint hangs starves a second meanwhile
        assertThat(drain.gate.tryEnter(other, true)).isFalse();
        drain.now.addAndGet(DestinationGate.STARVED_AFTER.toNanos());
        assertThat(drain.gate.tryEnter(drain.lane("newcomer"))).isFalse();
        drain.gate.leave(hanging); // the place it did not use, to the newcomer
        assertThat(drain.grants.get(drain.grants.size() - 1)).isEqualTo("newcomer");
        // a place frees: the other starved lane waits while the first holds its rescued place
        assertThat(drain.gate.tryEnter(drain.lane("newcomer"))).isFalse();
        drain.gate.leave(drain.holders.poll());
        assertThat(drain.grants.get(drain.grants.size() - 1)).isEqualTo("newcomer");
        // its probe fails, and it holds none: the other's turn
        drain.gate.leave(hanging, true);
        assertThat(drain.grants.get(drain.grants.size() - 1)).isEqualTo("hanging too");
    }

    /**
     * A gate of 8 places (one kept for lanes holding none) on a clock of the test's, held by 8
     * healthy lanes; {@code holds}: whether a lane granted a place is put among the {@code holders}
     * (those the test makes leave, oldest first).
     */
    private static final class Drain {
        final java.util.concurrent.atomic.AtomicLong now = new java.util.concurrent.atomic.AtomicLong();
        final DestinationGate gate = new DestinationGate(8, 1, now::get);
        final java.util.ArrayDeque<Consumer<DestinationGate>> holders = new java.util.ArrayDeque<>();
        final List<String> grants = new ArrayList<>();
        private final java.util.function.Predicate<String> holds;

        Drain(java.util.function.Predicate<String> holds) {
            this.holds = holds;
            for (int i = 0; i < 8; i++) {
                Consumer<DestinationGate> healthy = lane("healthy");
                assertThat(gate.tryEnter(healthy)).isTrue();
                holders.add(healthy);
            }
        }

        /** A lane named {@code name}, whose grants are recorded. */
        Consumer<DestinationGate> lane(String name) {
            return new Consumer<>() {
                @Override
                public void accept(DestinationGate g) {
                    grants.add(name);
                    if (holds.test(name)) {
                        holders.add(this);
                    }
                }
            };
        }
    }

    @Test
    void aNewcomerDoesNotOvertakeALaneThatWaits() {
        DestinationGate gate = new DestinationGate(1);
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> first = g -> grants.add("first");
        assertThat(gate.tryEnter(first)).isTrue();
        Consumer<DestinationGate> waiter = g -> grants.add("waiter");
        assertThat(gate.tryEnter(waiter)).isFalse();
        gate.forget(waiter); // its subscription was deleted
        assertThat(gate.waiting()).isZero();
        assertThat(gate.tryEnter(waiter)).isFalse();
        gate.leave(first);
        assertThat(grants).containsExactly("waiter");
    }

    /**
     * A lane forgotten with requests under way (its subscription deleted while its endpoint hangs,
     * or its destination moved to another host) is not kept once they have left: their failures
     * kept it as a lane "whose failure it has not seen yet", with the whole lane its callback holds,
     * for as long as walhook ran.
     */
    @Test
    void aLaneForgottenWithRequestsUnderWayIsNotKeptOnceTheyLeave() {
        DestinationGate gate = new DestinationGate(4);
        Consumer<DestinationGate> lane = new Consumer<>() {
            final byte[] whatALaneHolds = new byte[1 << 20];

            @Override
            public void accept(DestinationGate g) {
                throw new AssertionError("a forgotten lane is given no place: " + whatALaneHolds.length);
            }
        };
        assertThat(gate.tryEnter(lane)).isTrue();
        assertThat(gate.tryEnter(lane)).isTrue();
        gate.forget(lane);
        gate.leave(lane, true); // given up as the subscription is deleted
        gate.leave(lane, true);
        java.lang.ref.WeakReference<Consumer<DestinationGate>> kept = new java.lang.ref.WeakReference<>(lane);
        lane = null;
        org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(10)).until(() -> {
            System.gc();
            return kept.get() == null;
        });
        assertThat(gate.inUse()).isZero();
        assertThat(gate.waiting()).isZero();
    }

    /** A lane forgotten and back (its destination moved away and back) asks as the lane it is now. */
    @Test
    void aLaneForgottenWhileItsRequestsFailAsksAfreshWhenItComesBack() {
        DestinationGate gate = new DestinationGate(16); // 2 places kept for lanes holding none
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> moved = g -> grants.add("moved");
        Consumer<DestinationGate> busy = g -> grants.add("busy");
        assertThat(gate.tryEnter(moved)).isTrue();
        for (int i = 0; i < 13; i++) {
            assertThat(gate.tryEnter(busy)).isTrue();
        }
        gate.forget(moved); // its destination moved to another host; its request here then failed
        gate.leave(moved, true);
        assertThat(gate.tryEnter(busy)).isTrue(); // 14 of 16 under way: what is left is kept for lanes holding none
        // back, it holds none here and is judged by what its own count of failures says, not by that old failure
        assertThat(gate.tryEnter(moved, false)).isTrue();
        assertThat(grants).isEmpty();
    }

    /** A limit fitted down hands no place on until fewer are under way; fitted up, it hands its new ones on. */
    @Test
    void aLimitFittedToTheDestinationHoldsBackThenHandsOnItsPlaces() {
        DestinationGate gate = new DestinationGate(4);
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> a = g -> grants.add("a");
        Consumer<DestinationGate> b = g -> grants.add("b");
        Consumer<DestinationGate> c = g -> grants.add("c");
        for (Consumer<DestinationGate> lane : List.of(a, a, b, c)) {
            assertThat(gate.tryEnter(lane)).isTrue();
        }
        gate.fitTo(2); // the server allows fewer at once than are under way
        assertThat(gate.limit()).isEqualTo(2);
        Consumer<DestinationGate> d = g -> grants.add("d");
        assertThat(gate.tryEnter(d)).isFalse();
        gate.leave(a);
        gate.leave(a);
        assertThat(grants).as("nothing handed on while at or over the limit").isEmpty();
        assertThat(gate.inUse()).isEqualTo(2);
        gate.leave(b);
        assertThat(grants).containsExactly("d");
        Consumer<DestinationGate> e = g -> grants.add("e");
        assertThat(gate.tryEnter(e)).isFalse();
        gate.fitTo(100); // raised again, never above what it was made with: the lane waiting gets a new place
        assertThat(gate.limit()).isEqualTo(4);
        assertThat(grants).containsExactly("d", "e");
        assertThat(gate.tryEnter(a)).isTrue();
        assertThat(gate.inUse()).isEqualTo(4);
    }

    @Test
    void aLaneHoldingPlacesGetsAnotherOnlyWhenNoLaneWaitsForItsFirst() {
        DestinationGate gate = new DestinationGate(2);
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> slow = g -> grants.add("slow");
        Consumer<DestinationGate> fast1 = g -> grants.add("fast1");
        Consumer<DestinationGate> fast2 = g -> grants.add("fast2");
        assertThat(gate.tryEnter(slow)).isTrue();
        assertThat(gate.tryEnter(slow)).isTrue(); // a slow tenant's requests hold both places
        assertThat(gate.tryEnter(slow)).isFalse(); // it asked first for a third
        assertThat(gate.tryEnter(fast1)).isFalse();
        assertThat(gate.tryEnter(fast2)).isFalse();

        gate.leave(slow); // one of its requests ends: the lanes holding none go first
        assertThat(grants).containsExactly("fast1");
        gate.leave(fast1);
        assertThat(grants).containsExactly("fast1", "fast2");
        gate.leave(fast2); // nobody waits for a first place: the slow one gets its second
        assertThat(grants).containsExactly("fast1", "fast2", "slow");
        assertThat(gate.waiting()).isZero();
        assertThat(gate.inUse()).isEqualTo(2);
    }

    /**
     * Slow tenants that always have more to send take at most seven eighths of the places: a tenant
     * whose events come one at a time finds one free. Before, they took every place, and its next
     * event waited for one of their requests to end (up to the request timeout).
     */
    @Test
    void placesAreKeptForLanesHoldingNone() {
        DestinationGate gate = new DestinationGate(16);
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> slow = g -> grants.add("slow");
        Consumer<DestinationGate> slower = g -> grants.add("slower");
        assertThat(gate.tryEnter(slow)).isTrue();
        assertThat(gate.tryEnter(slower)).isTrue();
        for (int i = 2; i < 14; i++) {
            assertThat(gate.tryEnter(i % 2 == 0 ? slow : slower)).isTrue();
        }
        assertThat(gate.tryEnter(slow)).as("the last two places are kept").isFalse();
        assertThat(gate.inUse()).isEqualTo(14);

        Consumer<DestinationGate> occasional = g -> grants.add("occasional");
        assertThat(gate.tryEnter(occasional)).as("a lane holding none finds a place at once").isTrue();
        gate.leave(occasional); // its request ended: the kept place is not given to the slow ones
        assertThat(grants).isEmpty();
        assertThat(gate.inUse()).isEqualTo(14);
        assertThat(gate.tryEnter(occasional)).isTrue();
        gate.leave(occasional);

        gate.leave(slower); // one of theirs ends: the slow one waiting gets it, within the fourteen
        assertThat(grants).containsExactly("slow");
        assertThat(gate.inUse()).isEqualTo(14);
    }

    /**
     * Many tenants of a shared host whose endpoints hang, each probing one request at a time and
     * holding no place between probes: they asked as lanes holding none, took the places kept for
     * such lanes, and queued before a healthy tenant, which waited for hundreds of probes to time
     * out. A lane whose last attempt failed asks as one holding some: behind lanes waiting for
     * their first place, and never into the places kept for them.
     */
    @Test
    void lanesWhoseLastAttemptFailedQueueBehindHealthyOnesAndLeaveThemTheKeptPlaces() {
        DestinationGate gate = new DestinationGate(16); // 2 kept for lanes holding none
        List<Consumer<DestinationGate>> hung = new ArrayList<>();
        List<Integer> probed = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            int n = i;
            Consumer<DestinationGate> lane = g -> probed.add(n); // capturing: a lambda object of its own
            hung.add(lane);
            gate.tryEnter(lane, true);
        }
        assertThat(gate.inUse()).as("failing lanes leave the kept places free").isEqualTo(14);
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> healthy = g -> grants.add("healthy");
        assertThat(gate.tryEnter(healthy, false)).as("a healthy lane finds a kept place").isTrue();
        Consumer<DestinationGate> second = g -> grants.add("second");
        assertThat(gate.tryEnter(second, false)).isTrue();
        Consumer<DestinationGate> third = g -> grants.add("third");
        assertThat(gate.tryEnter(third, false)).isFalse();
        gate.leave(hung.get(0)); // a probe timed out: its place goes to the healthy lane waiting, not the next probe
        assertThat(grants).containsExactly("third");
        // once no healthy lane waits, the failing ones take their turns, still not into the kept places
        gate.leave(healthy);
        gate.leave(second);
        gate.leave(third);
        assertThat(gate.inUse()).isEqualTo(14);
        assertThat(probed).containsExactly(14);
    }

    /**
     * A lane waiting as a failing one whose attempt then succeeded (a request it held ended well,
     * an operator's replay) waits as a lane holding none: moved behind itself in the queue for first
     * places, it waited there while the kept places were free, and every healthy lane behind it.
     */
    @Test
    void aWaitingLaneWhoseLastAttemptNoLongerFailedTakesAKeptPlaceAtOnce() {
        DestinationGate gate = new DestinationGate(16); // 2 kept for lanes holding none
        List<Integer> granted = new ArrayList<>();
        List<Consumer<DestinationGate>> lanes = new ArrayList<>();
        for (int i = 0; i < 15; i++) {
            int n = i;
            Consumer<DestinationGate> lane = g -> granted.add(n);
            lanes.add(lane);
            gate.tryEnter(lane, true);
        }
        assertThat(gate.inUse()).isEqualTo(14);
        Consumer<DestinationGate> recovered = lanes.get(14); // waits as failing
        assertThat(gate.tryEnter(recovered, false)).as("judged afresh, it takes a kept place").isTrue();
        assertThat(gate.waiting()).isZero();
        Consumer<DestinationGate> healthy = g -> granted.add(-1);
        assertThat(gate.tryEnter(healthy, false)).as("and the next healthy lane the other").isTrue();
        assertThat(gate.inUse()).isEqualTo(16);
        // the other way round: waiting for a first place, its attempt failed meanwhile: it waits behind healthy lanes
        Consumer<DestinationGate> waiter = g -> granted.add(-2);
        Consumer<DestinationGate> later = g -> granted.add(-3);
        assertThat(gate.tryEnter(waiter, false)).isFalse();
        assertThat(gate.tryEnter(later, false)).isFalse();
        assertThat(gate.tryEnter(waiter, true)).isFalse();
        gate.leave(lanes.get(0));
        assertThat(granted).containsExactly(-3);
    }

    /**
     * A lane waiting for a second place whose one request fails: its failure is counted on its
     * next turn, after the place went on. Holding none, it waited as a healthy lane for its first
     * and took the place it had just left, a kept one.
     */
    @Test
    void aLaneWhoseRequestFailsWhileItWaitsForAnotherDoesNotTakeAKeptPlace() {
        DestinationGate gate = new DestinationGate(16); // 2 kept for lanes holding none
        List<Integer> others = new ArrayList<>();
        for (int i = 0; i < 14; i++) {
            int n = i;
            Consumer<DestinationGate> busy = g -> others.add(n); // capturing: a lambda object of its own
            assertThat(gate.tryEnter(busy, false)).isTrue();
        }
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> a = g -> grants.add("a");
        assertThat(gate.tryEnter(a, false)).as("holding none, a kept place").isTrue();
        assertThat(gate.tryEnter(a, false)).as("holding one, not another kept place").isFalse();
        gate.leave(a, true);
        assertThat(grants).as("its request failed: not a kept place again").isEmpty();
        assertThat(gate.inUse()).isEqualTo(14);
        Consumer<DestinationGate> healthy = g -> grants.add("healthy");
        assertThat(gate.tryEnter(healthy, false)).isTrue();
    }

    /**
     * A lane whose request fails while it is not waiting (its turn already running, about to ask):
     * its count of failures learns of the failure only on its next turn, so it asks as a healthy
     * lane holding none once more, and took a kept place.
     */
    @Test
    void aLaneWhoseRequestFailsBeforeItAsksAgainDoesNotTakeAKeptPlace() {
        DestinationGate gate = new DestinationGate(16); // 2 kept for lanes holding none
        List<Integer> others = new ArrayList<>();
        for (int i = 0; i < 14; i++) {
            int n = i;
            Consumer<DestinationGate> busy = g -> others.add(n);
            assertThat(gate.tryEnter(busy, false)).isTrue();
        }
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> a = g -> grants.add("a");
        assertThat(gate.tryEnter(a, false)).as("holding none, a kept place").isTrue();
        gate.leave(a, true);
        assertThat(gate.tryEnter(a, false)).as("asking before its turn counted the failure: still failing").isFalse();
        assertThat(gate.inUse()).isEqualTo(14);
        Consumer<DestinationGate> healthy = g -> grants.add("healthy");
        assertThat(gate.tryEnter(healthy, false)).as("the kept place is the healthy lane's").isTrue();
        gate.leave(healthy);
        assertThat(grants).as("a waits as a failing lane, not for a kept place").isEmpty();
        assertThat(gate.tryEnter(a, false)).as("the failure seen once, it asks as healthy again").isTrue();
    }

    @Test
    void aLaneWhoseLastRequestEndsWaitsForItsFirstPlaceAgain() {
        DestinationGate gate = new DestinationGate(1);
        List<String> grants = new ArrayList<>();
        Consumer<DestinationGate> a = g -> grants.add("a");
        Consumer<DestinationGate> b = g -> grants.add("b");
        Consumer<DestinationGate> c = g -> grants.add("c");
        assertThat(gate.tryEnter(a)).isTrue();
        assertThat(gate.tryEnter(a)).isFalse(); // waits for a second place
        assertThat(gate.tryEnter(b)).isFalse();
        gate.leave(a); // a holds none now: it waits for its first, behind b
        assertThat(gate.tryEnter(c)).isFalse();
        assertThat(grants).containsExactly("b");
        gate.leave(b);
        gate.leave(a);
        assertThat(grants).containsExactly("b", "a", "c");
    }

    @Test
    void requestsGoThroughTheChannelWithTheFewestToTheDestination() {
        DestinationGate gate = new DestinationGate(4, 2);
        assertThat(gate.channel()).isZero();
        assertThat(gate.channel()).isEqualTo(1);
        assertThat(gate.channel()).isZero();
        gate.channelDone(1);
        assertThat(gate.channel()).isEqualTo(1);
        assertThat(gate.channel()).isEqualTo(1);
        gate.channelDone(0);
        gate.channelDone(0);
        assertThat(gate.channel()).isZero();
    }

    @Test
    void refusesALimitBelowOne() {
        assertThatThrownBy(() -> new DestinationGate(0)).hasMessageContaining("at least one request");
    }

    @Test
    void underContentionNeverMoreThanItsLimitAndEveryRequestGoes() throws Exception {
        DestinationGate gate = new DestinationGate(3);
        AtomicInteger underWay = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        AtomicInteger done = new AtomicInteger();
        int lanes = 40;
        int perLane = 200;
        ExecutorService pool = Executors.newFixedThreadPool(4);
        CountDownLatch finished = new CountDownLatch(lanes * perLane);
        try {
            for (int i = 0; i < lanes; i++) {
                new Object() {
                    int left = perLane;
                    final ConcurrentLinkedQueue<DestinationGate> granted = new ConcurrentLinkedQueue<>();
                    final Consumer<DestinationGate> onGrant = g -> {
                        granted.add(g);
                        pool.execute(this::next);
                    };

                    synchronized void next() {
                        if (left == 0) {
                            DestinationGate unused;
                            while ((unused = granted.poll()) != null) {
                                unused.leave(onGrant);
                            }
                            return;
                        }
                        if (granted.poll() != null || gate.tryEnter(onGrant)) {
                            most.accumulateAndGet(underWay.incrementAndGet(), Math::max);
                            left--;
                            pool.execute(() -> {
                                underWay.decrementAndGet();
                                done.incrementAndGet();
                                gate.leave(onGrant);
                                finished.countDown();
                                next();
                            });
                        }
                    }
                }.next();
            }
            assertThat(finished.await(60, TimeUnit.SECONDS)).as("every lane sent all its requests").isTrue();
        } finally {
            pool.shutdown();
        }
        assertThat(done.get()).isEqualTo(lanes * perLane);
        assertThat(most.get()).isLessThanOrEqualTo(3);
    }
}
