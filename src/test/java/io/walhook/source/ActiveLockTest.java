package io.walhook.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

import org.junit.jupiter.api.Test;

import io.walhook.delivery.ParkedEventStore;
import io.walhook.pgoutput.Lsn;
import io.walhook.testing.TestPostgres;

/**
 * The slot's lock against a real PostgreSQL: an instance whose lock session is gone writes
 * nothing to the durable queues, and one taking the lock waits for (or ends) the writes of the one
 * before, so that whatever that one wrote is there when the new one's lanes look at their queues.
 */
class ActiveLockTest {

    private static final Duration WAIT = Duration.ofSeconds(30);

    private static ActiveLock lock(SourceFixture source, Duration fencePatience) {
        return new ActiveLock(source.server.jdbcUrl(source.database), source.server.user(), source.server.password(),
                source.slot, "walhook", fencePatience);
    }

    private static List<ParkedEventStore.Entry> entry(String eventId) {
        return List.of(new ParkedEventStore.Entry(eventId, Lsn.of(0x10), Instant.EPOCH, "application/json", Map.of(), null,
                "{}".getBytes(StandardCharsets.UTF_8), null, null));
    }

    /** Ends the session holding walhook's lock of the slot, as a network cut or an administrator does. */
    private static void endLockSession(SourceFixture source) throws SQLException {
        source.sql("SELECT pg_terminate_backend(pid, 10000) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                + " AND classid = " + ActiveLock.NAMESPACE + " AND objid = hashtext('" + source.slot + "')::oid");
    }

    /** A write to a queue under way: fenced by {@code lock}, a row written, not committed. */
    private static void beginWrite(ActiveLock lock, Connection write, String eventId) throws SQLException {
        write.setAutoCommit(false);
        lock.fence(write);
        try (Statement s = write.createStatement()) {
            s.execute("INSERT INTO walhook.parked_event (subscription_id, subscription, event_id, commit_lsn, content_type,"
                    + " headers, body, attempts) VALUES ('s', 's', '" + eventId + "', '0/10', 'application/json', '{}',"
                    + " '\\x7b7d', 0)");
        }
    }

    /**
     * The server gives the lock's session up once its instance is silent for seconds: a node that
     * died or a network cut sends no FIN, and the session's backend held the lock for the server's
     * TCP keepalive, over two hours by default, while every standby found it taken.
     */
    @Test
    void itsLockSessionIsGivenUpByTheServerOnceItsInstanceIsSilentForSeconds() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "dead_peer");
                ActiveLock active = lock(source, ActiveLock.FENCE_PATIENCE)) {
            assertThat(active.tryAcquire()).isTrue();
            assertThat(active.setting("tcp_keepalives_idle")).isEqualTo("5");
            assertThat(active.setting("tcp_keepalives_interval")).isEqualTo("2");
            assertThat(active.setting("tcp_keepalives_count")).isEqualTo("3");
            assertThat(active.setting("tcp_user_timeout")).isEqualTo("10000");
        }
    }

    @Test
    void anInstanceWhoseLockSessionIsGoneWritesNothingToTheDurableQueue() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "fence_gone");
                ActiveLock active = lock(source, ActiveLock.FENCE_PATIENCE)) {
            ParkedEventStore store = new ParkedEventStore(source.dataSource, "walhook", active::fence);
            assertThatThrownBy(() -> store.append("s", "s", entry("before"), 0, null))
                    .as("not holding the lock yet").isInstanceOf(SQLException.class);
            assertThat(active.tryAcquire()).isTrue();
            assertThat(store.append("s", "s", entry("held"), 0, null)).isEqualTo(1);

            endLockSession(source);
            assertThatThrownBy(() -> store.append("s", "s", entry("after"), 0, null))
                    .isInstanceOf(SQLException.class).hasMessageContaining("no longer holds the lock of slot " + source.slot);
            assertThat(store.count("s")).isEqualTo(1);

            // taken again (no one else took it): it writes again
            assertThat(active.stillHeld()).isFalse();
            assertThat(active.tryAcquire()).isTrue();
            assertThat(store.append("s", "s", entry("again"), 0, null)).isEqualTo(1);
        }
    }

    @Test
    void anInstanceSendsOnlyWithinItsLeaseWhichEachLookAtALiveLockSessionRenews() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "lease_runs_out");
                ActiveLock active = lock(source, ActiveLock.FENCE_PATIENCE)) {
            java.util.concurrent.atomic.AtomicInteger renewals = new java.util.concurrent.atomic.AtomicInteger();
            active.onRenewed(renewals::incrementAndGet);
            assertThat(active.sendableInNanos()).as("not holding the lock").isEqualTo(Long.MAX_VALUE);
            assertThat(active.tryAcquire()).isTrue();
            assertThat(active.sendableInNanos()).as("the first holder of the slot sends at once").isZero();
            // no look at the lock session for longer than the lease: whether or not it lives, nothing starts
            await().atMost(WAIT).until(() -> active.sendableInNanos() == Long.MAX_VALUE);
            int before = renewals.get();
            assertThat(active.stillHeld()).isTrue();
            assertThat(active.sendableInNanos()).as("found alive: renewed").isZero();
            assertThat(renewals.get()).as("told, so that what waits goes now").isEqualTo(before + 1);
            assertThat(active.stillHeld()).isTrue();
            assertThat(renewals.get()).as("renewed before it ran out: nothing to tell").isEqualTo(before + 1);

            // its lock session ends, as a network cut or an administrator ends it, and no one looks: within the
            // lease it stops on its own (a new holder waits that long before it sends)
            endLockSession(source);
            await().atMost(WAIT).until(() -> active.sendableInNanos() == Long.MAX_VALUE);
            assertThat(active.stillHeld()).isFalse();
            assertThat(active.tryAcquire()).as("taken again, no one else took it").isTrue();
            assertThat(active.sendableInNanos()).as("it stopped on its own lease: no waiting for itself").isZero();
        }
    }

    @Test
    void aNewHolderWaitsOutTheLeaseOfOneThatDidNotLetGoCleanlyAndNotOfOneThatDid() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "lease_waited");
                ActiveLock crashed = lock(source, ActiveLock.FENCE_PATIENCE);
                ActiveLock brief = lock(source, ActiveLock.FENCE_PATIENCE);
                ActiveLock next = lock(source, ActiveLock.FENCE_PATIENCE);
                ActiveLock after = lock(source, ActiveLock.FENCE_PATIENCE)) {
            assertThat(crashed.tryAcquire()).isTrue();
            endLockSession(source); // a crash, a kill -9, a session cut: it may send until its lease runs out
            // one that takes over and stops cleanly at once, still waiting, does not speak for the crashed one
            assertThat(brief.tryAcquire()).isTrue();
            assertThat(brief.sendableInNanos()).isPositive();
            brief.release();
            await().atMost(WAIT).until(next::tryAcquire);
            assertThat(next.sendableInNanos()).as("the one before that may still be sending")
                    .isPositive().isLessThanOrEqualTo(ActiveLock.LEASE.toNanos());
            await().atMost(WAIT).pollInterval(Duration.ofMillis(200))
                    .until(() -> next.stillHeld() && next.sendableInNanos() == 0);

            // this one stops cleanly, having sent all it sends: the next starts at once
            next.release();
            assertThat(next.sendableInNanos()).isEqualTo(Long.MAX_VALUE);
            await().atMost(WAIT).until(after::tryAcquire);
            assertThat(after.sendableInNanos()).isZero();
            assertThat(source.queryOne("SELECT released FROM walhook.activation WHERE slot_name = '" + source.slot + "'"))
                    .as("taken again: not released any more").isIn("f", "false");
        }
    }

    @Test
    void anActivationRowHeldByAnotherSessionDoesNotLeaveTheSlotsLockHeldOnTheServer() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "lock_row_held");
                ActiveLock first = lock(source, Duration.ofMillis(500));
                ActiveLock second = lock(source, Duration.ofMillis(500));
                ActiveLock third = lock(source, Duration.ofMillis(500));
                Connection locker = source.dataSource.getConnection()) {
            assertThat(first.tryAcquire()).isTrue();
            first.release();
            await().atMost(WAIT).until(() -> slotLockHolders(source) == 0);
            // the slot's activation row held (an operator's transaction, a migration): taking the lock gives up
            locker.setAutoCommit(false);
            try (Statement s = locker.createStatement()) {
                s.executeQuery("SELECT * FROM walhook.activation WHERE slot_name = '" + source.slot + "' FOR UPDATE").close();
            }
            CompletableFuture<Boolean> taking = CompletableFuture.supplyAsync(() -> {
                try {
                    return second.tryAcquire();
                } catch (SQLException e) {
                    throw new java.util.concurrent.CompletionException(e);
                }
            });
            assertThat(taking).failsWithin(Duration.ofSeconds(10)).withThrowableOfType(java.util.concurrent.ExecutionException.class)
                    .withCauseInstanceOf(SQLException.class);
            // and nothing on the server still holds the slot's lock for it, waiting for the row after walhook gave up
            await().atMost(Duration.ofSeconds(5)).until(() -> slotLockHolders(source) == 0);
            locker.rollback();
            await().atMost(WAIT).until(third::tryAcquire);
        }
    }

    private static long slotLockHolders(SourceFixture source) throws SQLException {
        return Long.parseLong(source.queryOne("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                + " AND classid = " + ActiveLock.NAMESPACE + " AND objid = hashtext('" + source.slot + "')::oid"));
    }

    @Test
    void anInstanceWhoseLockSessionEndedDoesNotTakeTheLockAgainIfAnotherWasActiveMeanwhile() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "lock_between");
                ActiveLock first = lock(source, ActiveLock.FENCE_PATIENCE);
                ActiveLock second = lock(source, ActiveLock.FENCE_PATIENCE);
                ActiveLock third = lock(source, ActiveLock.FENCE_PATIENCE)) {
            assertThat(first.tryAcquire()).isTrue();
            assertThat(second.tryAcquire()).as("held by the first").isFalse();
            // the first's lock session ends; the second takes over, and is gone before the first looks again
            endLockSession(source);
            assertThat(second.tryAcquire()).isTrue();
            second.close();
            assertThat(first.stillHeld()).isFalse();
            assertThat(first.tryAcquire()).as("another instance was active in between").isFalse();
            // it let go: a standby takes over (once the session it closed has ended on the server, which the
            // client's close does not wait for)
            await().atMost(WAIT).until(third::tryAcquire);
            assertThat(source.queryOne("SELECT activations FROM walhook.activation WHERE slot_name = '" + source.slot + "'"))
                    .isEqualTo("3");
        }
    }

    @Test
    void aNewHolderWaitsForTheWritesThePreviousHolderBeganWhileItHeldTheLock() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "fence_wait");
                ActiveLock before = lock(source, ActiveLock.FENCE_PATIENCE);
                ActiveLock after = lock(source, ActiveLock.FENCE_PATIENCE);
                Connection write = source.dataSource.getConnection()) {
            assertThat(before.tryAcquire()).isTrue();
            // the instance holding the lock begins a write to a queue: it checked its lock, and is slow to commit
            beginWrite(before, write, "late");
            // its lock session ends; another instance takes the lock, and waits for that write before it goes on
            endLockSession(source);
            CompletableFuture<Boolean> taking = CompletableFuture.supplyAsync(() -> {
                try {
                    return after.tryAcquire();
                } catch (SQLException e) {
                    throw new IllegalStateException(e);
                }
            });
            await().during(Duration.ofSeconds(1)).atMost(WAIT).until(() -> !taking.isDone());
            write.commit();
            assertThat(taking.get()).isTrue();
            // so its lanes, looking at their queues from now on, find the row
            ParkedEventStore store = new ParkedEventStore(source.dataSource, "walhook", after::fence);
            assertThat(store.firstLook(List.of("s")).withRows()).isEqualTo(Set.of("s"));
            // and the one before writes nothing more
            ParkedEventStore old = new ParkedEventStore(source.dataSource, "walhook", before::fence);
            assertThatThrownBy(() -> old.append("s", "s", entry("later"), 0, null)).isInstanceOf(SQLException.class);
            assertThat(store.append("s", "s", entry("new"), 0, null)).isEqualTo(1);
            assertThat(store.count("s")).isEqualTo(2);
        }
    }

    /** The 64-bit key of the token lock the session holding walhook's lock of the slot holds beside it. */
    private static long token(SourceFixture source) throws SQLException {
        return Long.parseLong(source.queryOne("SELECT (t.classid::bigint << 32) | t.objid::bigint FROM pg_locks t JOIN"
                + " pg_locks l USING (pid) WHERE l.locktype = 'advisory' AND l.classid = " + ActiveLock.NAMESPACE
                + " AND l.objid = hashtext('" + source.slot + "')::oid AND t.locktype = 'advisory' AND t.objsubid = 1"));
    }

    @Test
    void aNewHolderWaitsUntilTheSessionBeforeItHasReleasedItsTokenToo() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "fence_token");
                ActiveLock before = lock(source, ActiveLock.FENCE_PATIENCE);
                ActiveLock after = lock(source, Duration.ofMillis(500));
                Connection dying = source.dataSource.getConnection()) {
            assertThat(before.tryAcquire()).isTrue();
            long token = token(source);
            // a backend ending releases its locks one partition of the lock table at a time: the slot's lock may be
            // free while its token is still held; here another session goes on holding the token, as one stalled
            // between the two would
            endLockSession(source);
            try (Statement s = dying.createStatement()) {
                s.execute("SELECT pg_advisory_lock(" + token + ")");
            }
            assertThat(after.tryAcquire()).isTrue();
            // the instance before, not knowing yet that its session is gone, finds its token free: it writes nothing
            // its successor's lanes would not see
            ParkedEventStore old = new ParkedEventStore(source.dataSource, "walhook", before::fence);
            assertThatThrownBy(() -> old.append("s", "s", entry("stale"), 0, null)).isInstanceOf(SQLException.class)
                    .hasMessageContaining("no longer holds the lock of slot " + source.slot);
            assertThat(dying.isValid(5)).as("the session still holding the token is ended after the patience").isFalse();
        }
    }

    @Test
    void aNewHolderEndsAWriteOfThePreviousHolderThatHangs() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "fence_hang");
                ActiveLock before = lock(source, ActiveLock.FENCE_PATIENCE);
                ActiveLock after = lock(source, Duration.ofMillis(500));
                Connection write = source.dataSource.getConnection()) {
            assertThat(before.tryAcquire()).isTrue();
            beginWrite(before, write, "hung");
            endLockSession(source);
            // the write never ends (its instance frozen): the new holder ends it after its patience, and its row is gone
            assertThat(after.tryAcquire()).isTrue();
            assertThatThrownBy(write::commit).isInstanceOf(SQLException.class);
            assertThat(new ParkedEventStore(source.dataSource, "walhook").count("s")).isZero();
        }
    }
}
