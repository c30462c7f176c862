package io.walhook.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.UUID;

import org.junit.jupiter.api.Test;

import io.walhook.routing.SubscriptionStore;
import io.walhook.testing.TcpProxy;
import io.walhook.testing.TestPostgres;

/**
 * The poller's wake-up: every subscription and backfill write notifies, and a lost listening
 * session comes back, whether it ended or was left half-open.
 */
class SubscriptionChangesTest {

    private static final String BODY = "{\"name\": \"%s\", \"destination\": {\"type\": \"webhook\","
            + " \"url\": \"http://127.0.0.1:9/t\"}}";

    @Test
    void everyWriteWakesTheListenerAndALostSessionIsOpenedAgain() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "listen");
             SubscriptionChanges changes = new SubscriptionChanges(source.server.jdbcUrl(source.database),
                     source.server.user(), source.server.password(),
                     java.util.List.of(SubscriptionStore.CHANNEL, io.walhook.backfill.BackfillStore.CHANNEL,
                             io.walhook.delivery.ParkedEventStore.DROPS_CHANNEL))) {
            source.prepare("*");
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            assertThat(changes.await(Duration.ofMillis(200))).as("opening: what came before is unheard").hasSize(3);
            assertThat(changes.await(Duration.ofMillis(200))).as("nothing written: the wait times out").isEmpty();
            assertThat(changes.listening()).isTrue();

            // each kind of write, seen as it commits: a minute-long wait that returned true did not time out
            UUID id = store.insert(SourceFixture.JSON.readTree(String.format(BODY, "a")));
            assertThat(changes.await(Duration.ofMinutes(1))).as("insert").containsExactly(SubscriptionStore.CHANNEL);
            store.replace(id, SourceFixture.JSON.readTree(String.format(BODY, "b")));
            assertThat(changes.await(Duration.ofMinutes(1))).as("replace").containsExactly(SubscriptionStore.CHANNEL);
            store.setPaused(id, true);
            assertThat(changes.await(Duration.ofMinutes(1))).as("pause").containsExactly(SubscriptionStore.CHANNEL);
            store.delete(id);
            assertThat(changes.await(Duration.ofMinutes(1))).as("delete").containsExactly(SubscriptionStore.CHANNEL);
            assertThat(store.delete(id)).as("deleting nothing").isFalse();
            assertThat(changes.await(Duration.ofMillis(200))).as("notifies nothing").isEmpty();

            // a backfill written through any instance's API is announced on its own channel
            new io.walhook.backfill.BackfillStore(source.dataSource, "walhook").announce();
            assertThat(changes.await(Duration.ofMinutes(1))).containsExactly(io.walhook.backfill.BackfillStore.CHANNEL);

            // dead letters dropped through any instance's API: each subscription named once, for that wait only
            String drops = io.walhook.delivery.ParkedEventStore.DROPS_CHANNEL;
            source.sql("BEGIN; SELECT pg_notify('" + drops + "', 's1'); SELECT pg_notify('" + drops + "', 's2');"
                    + " SELECT pg_notify('" + drops + "', 's1'); COMMIT");
            assertThat(changes.await(Duration.ofMinutes(1))).containsExactly(drops);
            assertThat(changes.payloads(drops)).containsExactlyInAnyOrder("s1", "s2");
            store.insert(SourceFixture.JSON.readTree(String.format(BODY, "d")));
            assertThat(changes.await(Duration.ofMinutes(1))).containsExactly(SubscriptionStore.CHANNEL);
            assertThat(changes.payloads(drops)).isEmpty();

            // the session ends (a failover, a restart): the next waits open a new one, which hears the writes after it
            source.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'walhook-listen'"
                    + " AND datname = '" + source.database + "'");
            await().atMost(Duration.ofMinutes(1)).until(() -> !changes.await(Duration.ofMillis(500)).isEmpty()
                    && changes.opened());
            store.insert(SourceFixture.JSON.readTree(String.format(BODY, "c")));
            assertThat(changes.await(Duration.ofMinutes(1))).containsExactly(SubscriptionStore.CHANNEL);
            assertThat(changes.opened()).isFalse();
        }
    }

    /**
     * A write committed while the session was away notified no one, and the session opened again
     * after it heard nothing of it: an edit waited for the poller's fallback (30 s), and dead
     * letters dropped through another instance could still be sent by the active one. The wait
     * that opens the session reports every channel, as unknown in what they name.
     */
    @Test
    void aWriteWhileTheSessionWasAwayIsReportedByTheWaitThatOpensItAgain() throws Exception {
        String drops = io.walhook.delivery.ParkedEventStore.DROPS_CHANNEL;
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "listen_away");
             SubscriptionChanges changes = new SubscriptionChanges(source.server.jdbcUrl(source.database),
                     source.server.user(), source.server.password(), java.util.List.of(SubscriptionStore.CHANNEL, drops))) {
            source.prepare("*");
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            assertThat(changes.await(Duration.ofMillis(200))).containsExactlyInAnyOrder(SubscriptionStore.CHANNEL, drops);
            assertThat(changes.opened()).isTrue();
            assertThat(changes.await(Duration.ofMillis(200))).isEmpty();
            assertThat(changes.opened()).isFalse();

            source.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'walhook-listen'"
                    + " AND datname = '" + source.database + "'");
            // told to no one
            store.insert(SourceFixture.JSON.readTree(String.format(BODY, "while-away")));
            source.sql("SELECT pg_notify('" + drops + "', 's1')");
            java.util.Set<String> heard = await().atMost(Duration.ofSeconds(30))
                    .until(() -> changes.await(Duration.ofMillis(500)), notified -> !notified.isEmpty());
            assertThat(heard).containsExactlyInAnyOrder(SubscriptionStore.CHANNEL, drops);
            assertThat(changes.opened()).isTrue();
            assertThat(changes.payloads(drops)).as("which subscription is not known").isEmpty();
            // and the new session hears what follows, as it is written
            source.sql("SELECT pg_notify('" + drops + "', 's2')");
            assertThat(changes.await(Duration.ofMinutes(1))).containsExactly(drops);
            assertThat(changes.opened()).isFalse();
            assertThat(changes.payloads(drops)).containsExactly("s2");
        }
    }

    @Test
    void aListeningSessionAFailoverLeftHalfOpenIsReplaced() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "listen_half_open");
             TcpProxy proxy = TcpProxy.to(source.server.host(), source.server.port());
             SubscriptionChanges changes = new SubscriptionChanges("jdbc:postgresql://" + source.server.host() + ":"
                     + proxy.port() + "/" + source.database, source.server.user(), source.server.password(),
                     java.util.List.of(SubscriptionStore.CHANNEL), Duration.ofSeconds(2))) {
            source.prepare("*");
            SubscriptionStore store = new SubscriptionStore(source.dataSource, "walhook");
            assertThat(changes.await(Duration.ofMillis(200))).as("opening").containsExactly(SubscriptionStore.CHANNEL);
            assertThat(changes.await(Duration.ofMillis(200))).isEmpty();
            store.insert(SourceFixture.JSON.readTree(String.format(BODY, "a")));
            assertThat(changes.await(Duration.ofMinutes(1))).containsExactly(SubscriptionStore.CHANNEL);

            // its server gone without a word: a session that waits on it hears nothing, ever
            proxy.loseServerOfAll();
            await().atMost(Duration.ofMinutes(1)).until(() -> !changes.await(Duration.ofMillis(500)).isEmpty()
                    && changes.opened());
            assertThat(proxy.connections()).as("a new session").isEqualTo(2);
            store.insert(SourceFixture.JSON.readTree(String.format(BODY, "b")));
            assertThat(changes.await(Duration.ofMinutes(1))).containsExactly(SubscriptionStore.CHANNEL);
        }
    }
}
