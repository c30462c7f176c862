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

/** The places of one destination shared by lanes: never more under way than its limit, handed on in the order asked. */
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

        gate.leave(); // handed straight to c, the first to wait: still two under way
        assertThat(grants).containsExactly("c");
        assertThat(gate.inUse()).isEqualTo(2);
        gate.leave();
        assertThat(grants).containsExactly("c", "a");
        assertThat(gate.waiting()).isZero();
        // nobody waits: a place is free, and a new lane takes it without waiting
        gate.leave();
        assertThat(gate.inUse()).isEqualTo(1);
        assertThat(gate.tryEnter(b)).isTrue();
    }

    @Test
    void aNewcomerDoesNotOvertakeALaneThatWaits() {
        DestinationGate gate = new DestinationGate(1);
        List<String> grants = new ArrayList<>();
        assertThat(gate.tryEnter(g -> grants.add("first"))).isTrue();
        Consumer<DestinationGate> waiter = g -> grants.add("waiter");
        assertThat(gate.tryEnter(waiter)).isFalse();
        gate.forget(waiter); // its subscription was deleted
        assertThat(gate.waiting()).isZero();
        assertThat(gate.tryEnter(waiter)).isFalse();
        gate.leave();
        assertThat(grants).containsExactly("waiter");
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
                                unused.leave();
                            }
                            return;
                        }
                        if (granted.poll() != null || gate.tryEnter(onGrant)) {
                            most.accumulateAndGet(underWay.incrementAndGet(), Math::max);
                            left--;
                            pool.execute(() -> {
                                underWay.decrementAndGet();
                                done.incrementAndGet();
                                gate.leave();
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
