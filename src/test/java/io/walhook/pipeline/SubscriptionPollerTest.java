package io.walhook.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import io.walhook.backfill.BackfillStore;
import io.walhook.config.SourceUrl;
import io.walhook.routing.Subscription;
import io.walhook.routing.SubscriptionRegistry;
import io.walhook.routing.SubscriptionStore;
import io.walhook.source.ActiveLock;
import io.walhook.source.SourceFixture;
import io.walhook.testing.TestPostgres;

/** The thread that reloads subscriptions and watches the lock, against a real PostgreSQL. */
class SubscriptionPollerTest {

    private static final Duration WAIT = Duration.ofSeconds(30);

    @Test
    void aFailureOfAnyKindInOneRoundDoesNotEndIt() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "poller_goes_on");
                ActiveLock lock = new ActiveLock(source.server.jdbcUrl(source.database), source.server.user(),
                        source.server.password(), source.slot, "walhook")) {
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(), store);
            AtomicInteger wakes = new AtomicInteger();
            SubscriptionPoller poller = standbyPoller(source, lock, registry, () -> {
                if (wakes.incrementAndGet() == 1) {
                    throw new IllegalStateException(); // no message, as a NullPointerException has none
                }
            });
            poller.start();
            try {
                // a backfill written: the runner's wake-up fails once
                await().atMost(WAIT).untilAsserted(() -> {
                    source.sql("SELECT pg_notify('" + BackfillStore.CHANNEL + "', '')");
                    assertThat(wakes.get()).isPositive();
                });
                // the poller still reloads the subscriptions written after it
                store.insert(SourceFixture.JSON.readTree("{\"name\": \"later\", \"destination\": {\"type\": \"webhook\","
                        + " \"url\": \"http://127.0.0.1:9/t\"}}"));
                await().atMost(WAIT).until(() -> registry.inForce().subscriptions().stream().map(Subscription::name)
                        .toList().contains("later"));
                source.sql("SELECT pg_notify('" + BackfillStore.CHANNEL + "', '')");
                await().atMost(WAIT).until(() -> wakes.get() >= 2);
            } finally {
                poller.stop();
            }
        }
    }

    /**
     * A write committed whose notification failed (its connection broke after the commit) and whose
     * answering instance could not read the subscriptions again: nothing told the poller, which
     * looked at the table again only after 30 s, routing with the old filters meanwhile (a filter
     * widened: the changes it now matches, acknowledged unsent). Told a read is owed, it reads at
     * its next round.
     */
    @Test
    void aWriteNotReadAgainWhereItWasAnsweredIsReadAtTheNextRound() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "poller_owed");
                ActiveLock lock = new ActiveLock(source.server.jdbcUrl(source.database), source.server.user(),
                        source.server.password(), source.slot, "walhook")) {
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(), new SubscriptionStore(source.dataSource, "walhook"));
            SubscriptionPoller poller = standbyPoller(source, lock, registry, () -> { });
            poller.start();
            try {
                await().atMost(WAIT).until(() -> source.queryOne("SELECT count(*) FROM pg_stat_activity WHERE query LIKE"
                        + " 'LISTEN%' AND datname = current_database()").equals("1"));
                // written, and no instance told
                source.sql("INSERT INTO walhook.subscription (id, name, body) VALUES (gen_random_uuid(), 'unheard',"
                        + " '{\"name\": \"unheard\", \"destination\": {\"type\": \"webhook\", \"url\": \"http://127.0.0.1:9/t\"}}')");
                poller.refreshOwed();
                await().atMost(Duration.ofSeconds(10)).until(() -> registry.inForce().subscriptions().stream()
                        .map(Subscription::name).toList().contains("unheard"));
            } finally {
                poller.stop();
            }
        }
    }

    /**
     * A start-up that fails after the poller started shuts the container down: a round still under
     * way then fails on a bean that is gone. The stop waits for that round, and its failure is not
     * reported as walhook's: the packaged jar's output named no stack trace but the one it showed.
     */
    @Test
    void aStopWaitsForTheRoundUnderWayAndItsFailureIsNotReported() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "poller_stops");
                ActiveLock lock = new ActiveLock(source.server.jdbcUrl(source.database), source.server.user(),
                        source.server.password(), source.slot, "walhook");
                io.walhook.testing.LogLines log = new io.walhook.testing.LogLines(SubscriptionPoller.class)) {
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(),
                    new SubscriptionStore(source.dataSource, "walhook"));
            java.util.concurrent.CountDownLatch inRound = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.atomic.AtomicBoolean roundEnded = new java.util.concurrent.atomic.AtomicBoolean();
            SubscriptionPoller poller = standbyPoller(source, lock, registry, () -> {
                inRound.countDown();
                // as a JDBC call does, this round does not end at an interrupt; it ends on its own, soon after
                long until = System.nanoTime() + Duration.ofMillis(300).toNanos();
                while (System.nanoTime() - until < 0) {
                    Thread.onSpinWait();
                }
                roundEnded.set(true);
                throw new IllegalStateException("ArC container not initialized");
            });
            poller.start();
            await().atMost(WAIT).untilAsserted(() -> {
                source.sql("SELECT pg_notify('" + BackfillStore.CHANNEL + "', '')");
                assertThat(inRound.getCount()).isZero();
            });
            poller.stop();
            assertThat(roundEnded).as("the round under way ended before the stop returned").isTrue();
            assertThat(log.lines()).as("what the poller logged").isEmpty();
        }
    }

    /**
     * A poller of a standby instance (no dispatcher, not active) on the fixture's database;
     * {@code backfillsChanged} is what a backfill's notification wakes.
     */
    private static SubscriptionPoller standbyPoller(SourceFixture source, ActiveLock lock, SubscriptionRegistry registry,
            Runnable backfillsChanged) {
        SourceUrl url = SourceUrl.parse(Optional.of(source.server.sourceUrl(source.database)), Optional.empty(),
                Optional.empty());
        return new SubscriptionPoller(url, registry, () -> null, lock,
                new io.walhook.source.PublicationWatch(new io.walhook.source.SourceDatabase(source.dataSource), "walhook"),
                source.slot, () -> false, () -> false,
                backfillsChanged, () -> { });
    }
}
