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
     * Dead letters dropped through the API before this instance's listening session first opened
     * (it could not connect yet, or opened only after activation had the lanes read their queues):
     * no instance heard the drop, and the rows a lane had read back were sent once the destination
     * took them, though the API had answered that they were dropped. The session's first opening
     * has the lanes read their queues again, as each later opening does.
     */
    @Test
    void deadLettersDroppedBeforeTheSessionFirstListenedAreNotSentFromWhatTheLanesReadBefore() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "poller_drops");
                Delivering delivering = new Delivering(source, 503)) {
            await().atMost(WAIT).until(() -> delivering.receiver.requests().size() >= 3); // read back, and failing
            assertThat(delivering.parked.drop(delivering.subscription.id(), null)).isEqualTo(3); // told to no one
            SubscriptionPoller poller = delivering.poller();
            poller.start();
            try {
                // what the lane read back is let go of, and its queue, read again, is empty
                await().atMost(WAIT).until(() -> delivering.dispatcher.status().get(0).mode().equals("direct"));
                delivering.refusing.set(false);
                await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(5)).until(() -> delivering.taken.get() == 0);
            } finally {
                poller.stop();
            }
        }
    }

    /**
     * A replay asked through the API while no listening session of the active instance listened
     * (the database restarting, say): no instance heard it, and a subscription a 410 had disabled
     * stayed disabled, its events queued, until the next replay. Once the session listens again,
     * what a 410 disabled and a replay cleared the record of since is enabled again.
     */
    @Test
    void aReplayAskedWhileNoSessionListenedEnablesWhatA410DisabledOnceOneListens() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "poller_replays");
                Delivering delivering = new Delivering(source, 410)) {
            await().atMost(WAIT).until(() -> delivering.dispatcher.status().get(0).disabled());
            delivering.refusing.set(false); // the endpoint is back
            delivering.parked.replay(delivering.subscription.id()); // told to no one
            SubscriptionPoller poller = delivering.poller();
            poller.start();
            try {
                await().atMost(WAIT).until(() -> delivering.taken.get() == 3);
                assertThat(delivering.dispatcher.status().get(0).disabled()).isFalse();
            } finally {
                poller.stop();
            }
        }
    }

    /**
     * An active instance's delivery on the fixture's database: one subscription to a receiver
     * answering {@code refusal} while {@link #refusing}, whose durable queue holds three events
     * left from before, read back at once. {@link #poller} watches for it.
     */
    private static final class Delivering implements AutoCloseable {
        final io.vertx.core.Vertx vertx = io.vertx.core.Vertx.vertx();
        final io.walhook.delivery.WebhookClient client = new io.walhook.delivery.WebhookClient(vertx);
        final io.walhook.testing.WebhookReceiver receiver = io.walhook.testing.WebhookReceiver.start();
        final java.util.concurrent.atomic.AtomicBoolean refusing = new java.util.concurrent.atomic.AtomicBoolean(true);
        final AtomicInteger taken = new AtomicInteger();
        final SourceFixture source;
        final ActiveLock lock;
        final Subscription subscription;
        final io.walhook.delivery.ParkedEventStore parked;
        final io.walhook.delivery.Dispatcher dispatcher;

        Delivering(SourceFixture source, int refusal) throws Exception {
            this.source = source;
            lock = new ActiveLock(source.server.jdbcUrl(source.database), source.server.user(), source.server.password(),
                    source.slot, "walhook");
            receiver.respond(request -> {
                if (refusing.get()) {
                    return refusal;
                }
                taken.incrementAndGet();
                return 204;
            });
            subscription = new Subscription("config:queued", "queued", List.of(io.walhook.routing.TablePattern.ALL),
                    java.util.Set.of(io.walhook.change.Operation.values()), Optional.empty(),
                    new io.walhook.routing.Destination.Webhook(java.net.URI.create(receiver.url("/queued")), List.of(),
                            java.util.Map.of()),
                    io.walhook.routing.EventFormat.JSON, 1, 0, io.walhook.routing.Projection.ALL, false,
                    io.walhook.routing.RetryPolicy.DEFAULTS, null);
            parked = new io.walhook.delivery.ParkedEventStore(source.dataSource, "walhook");
            List<io.walhook.delivery.ParkedEventStore.Entry> entries = new java.util.ArrayList<>();
            for (int n = 0; n < 3; n++) {
                entries.add(new io.walhook.delivery.ParkedEventStore.Entry("queued-" + n, io.walhook.pgoutput.Lsn.of(0x10 + n),
                        java.time.Instant.EPOCH, "application/json", java.util.Map.of(), null,
                        "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null));
            }
            parked.append(subscription.id(), subscription.name(), entries, 0, null);
            dispatcher = new io.walhook.delivery.Dispatcher(java.time.Clock.systemUTC(),
                    new io.walhook.delivery.Dispatcher.Settings(Duration.ofSeconds(2), Duration.ofMillis(300),
                            Duration.ofMinutes(10), Duration.ofSeconds(1), 4),
                    parked, io.walhook.delivery.DeliveryMetrics.NONE, id -> false,
                    s -> new io.walhook.delivery.WebhookTransport(client, (io.walhook.routing.Destination.Webhook) s.destination(),
                            java.time.Clock.systemUTC(), Duration.ofSeconds(2), false));
            dispatcher.resumeParked(List.of(subscription));
        }

        /** The poller of the instance delivering, not started; its session opens as it starts. */
        SubscriptionPoller poller() {
            SubscriptionRegistry registry = new SubscriptionRegistry(List.of(subscription),
                    new SubscriptionStore(source.dataSource, "walhook"));
            return new SubscriptionPoller(SourceUrl.parse(Optional.of(source.server.sourceUrl(source.database)),
                    Optional.empty(), Optional.empty()), registry, () -> dispatcher, lock,
                    new io.walhook.source.PublicationWatch(new io.walhook.source.SourceDatabase(source.dataSource), "walhook"),
                    source.slot, () -> false, () -> false, () -> { }, () -> { }, why -> { });
        }

        @Override
        public void close() throws Exception {
            dispatcher.close();
            receiver.close();
            client.close();
            lock.close();
            vertx.close().toCompletionStage().toCompletableFuture().join();
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
                backfillsChanged, () -> { }, why -> { });
    }
}
