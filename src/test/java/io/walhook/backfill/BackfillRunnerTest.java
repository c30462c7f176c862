package io.walhook.backfill;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.util.List;
import java.util.Set;
import java.util.UUID;

import org.junit.jupiter.api.Test;

/**
 * The parts of the runner that need no database (read event ids, a snapshot's in-progress xids,
 * when an idle round ends), and how it stops.
 */
class BackfillRunnerTest {

    private static final UUID BACKFILL = UUID.fromString("5f0c2a8e-1111-4222-8333-944455556666");

    /**
     * A read event's id: the backfill's id and 128 bits of an HMAC of the row's table and key under
     * the backfill's own key. It was a plain SHA-256, which anyone reading an id in a log could match
     * to a guessed key (SHA-256("public.users\0alice@example.com")): under another key, or none, the
     * same row has another id. A backfill from before keys (none) keeps its SHA-256 ids.
     */
    @Test
    void aRowsIdIsItsBackfillAnd128BitsOfAnHmacOfItsTableAndKeyTheSameEveryTime() throws Exception {
        byte[] key = "0123456789abcdef0123456789abcdef".getBytes(java.nio.charset.StandardCharsets.UTF_8);
        String id = BackfillRunner.eventId(BACKFILL, key, "public.orders", "42");
        assertThat(id).matches(BACKFILL + "-[0-9a-f]{32}");
        assertThat(BackfillRunner.eventId(BACKFILL, key.clone(), "public.orders", "42")).isEqualTo(id);
        assertThat(BackfillRunner.eventId(BACKFILL, key, "public.orders", "43")).isNotEqualTo(id);
        assertThat(BackfillRunner.eventId(BACKFILL, key, "public.order", "s42")).as("table and key kept apart")
                .isNotEqualTo(id);
        assertThat(BackfillRunner.eventId(UUID.randomUUID(), key, "public.orders", "42")).doesNotStartWith(BACKFILL.toString());
        assertThat(BackfillRunner.eventId(BACKFILL, key, "public.accounts", "acme\0" + "7"))
                .isNotEqualTo(BackfillRunner.eventId(BACKFILL, key, "public.accounts", "acme7"));

        // what a guess at the key computes is not the id
        byte[] sha = java.security.MessageDigest.getInstance("SHA-256")
                .digest("public.orders\0" .concat("42").getBytes(java.nio.charset.StandardCharsets.UTF_8));
        String guessed = BACKFILL + "-" + java.util.HexFormat.of().formatHex(sha, 0, 16);
        assertThat(id).isNotEqualTo(guessed);
        byte[] another = key.clone();
        another[0] ^= 1;
        assertThat(BackfillRunner.eventId(BACKFILL, another, "public.orders", "42")).isNotEqualTo(id);
        // a backfill from before keys keeps the ids it had
        assertThat(BackfillRunner.eventId(BACKFILL, null, "public.orders", "42")).isEqualTo(guessed);
    }

    /**
     * Rows moved read again together, cut at the chunk's byte bound: the rest is read next, and the
     * chunk keeps only those it read (read again whole, it read the rest a second time, cut again,
     * and put it back twice).
     */
    @Test
    void aChunkOfRowsMovedCutAtItsByteBoundKeepsWhatItReadAndGivesBackTheRest() {
        java.util.UUID backfill = java.util.UUID.randomUUID();
        List<Watermarks.Moved> moved = new java.util.ArrayList<>();
        for (String key : List.of("1", "2", "3", "4")) {
            moved.add(new Watermarks.Moved(backfill, "public.items", List.of(key), io.walhook.pgoutput.Lsn.of(0x10)));
        }
        Chunk cut = new Chunk("t", backfill, "s", null, null, null);
        cut.moved = moved;
        cut.rows = List.of(new Chunk.Row("1", "a", io.walhook.pgoutput.TupleData.builder().text("1").build()),
                new Chunk.Row("3", "b", io.walhook.pgoutput.TupleData.builder().text("3").build()));
        assertThat(BackfillRunner.cutAt(cut, moved)).extracting(Watermarks.Moved::key)
                .containsExactly(List.of("2"), List.of("4"));
        assertThat(cut.moved).extracting(Watermarks.Moved::key).containsExactly(List.of("1"), List.of("3"));
    }

    @Test
    void anIdleRoundEndsWhenABackfillHeldByItsRateMayReadItsNextChunk() {
        long now = 1_000_000_000_000L;
        long poll = BackfillRunner.IDLE_POLL.toNanos();
        assertThat(BackfillRunner.idleDeadline(now)).isEqualTo(now + poll);
        assertThat(BackfillRunner.idleDeadline(now, 0, 0)).as("none held by its rate").isEqualTo(now + poll);
        // held by 1,000 rows a second for a chunk of 500: due in half a second, not after the whole round
        assertThat(BackfillRunner.idleDeadline(now, 0, now + 500_000_000L, now + 2_000_000_000L))
                .isEqualTo(now + 500_000_000L);
        assertThat(BackfillRunner.idleDeadline(now, now + poll + 1)).as("due after the round").isEqualTo(now + poll);
        assertThat(BackfillRunner.idleDeadline(now, now - 5)).as("due already: no wait").isEqualTo(now - 5);
        // System.nanoTime may be negative and wrap: compared by difference
        long negative = Long.MIN_VALUE + 10;
        assertThat(BackfillRunner.idleDeadline(negative, negative + 100)).isEqualTo(negative + 100);
    }

    /**
     * A chunk done (to be read again) while its backfill's next reading is held by its rate or by a
     * pause for a table's lock: the idle round waited "a little" for that chunk, which returned at
     * once, and the runner spun (and asked the state database for its backfills) until the due.
     * It waits for the due instead.
     */
    @Test
    void anIdleRoundDoesNotWaitOnADoneChunkWhoseNextReadingIsHeld() {
        long now = System.nanoTime();
        Chunk head = new Chunk("t", java.util.UUID.randomUUID(), "s", null, null, null);
        assertThat(BackfillRunner.waitsOn(head, true, 0, now)).as("in flight").isTrue();
        assertThat(BackfillRunner.waitsOn(head, true, now + 1_000_000_000L, now)).as("in flight, the next held").isTrue();
        assertThat(BackfillRunner.waitsOn(head, false, 0, now)).as("its backfill left waiting this round").isFalse();
        head.outcome.complete(Chunk.Outcome.again("a test"));
        assertThat(BackfillRunner.waitsOn(head, true, 0, now)).as("done: taken in by the next round").isTrue();
        assertThat(BackfillRunner.waitsOn(head, true, now + 1_000_000_000L, now)).as("done, held by its rate").isFalse();
        assertThat(BackfillRunner.waitsOn(head, true, now - 1, now)).as("done, its due passed").isTrue();
        Chunk sent = new Chunk("t", java.util.UUID.randomUUID(), "s", null, null, null);
        sent.outcome.complete(new Chunk.Outcome(1));
        assertThat(BackfillRunner.waitsOn(sent, true, now + 1_000_000_000L, now)).as("sent: taken in by the next round")
                .isTrue();
        head.againAt = now + 1_000_000_000L;
        assertThat(BackfillRunner.waitsOn(head, true, 0, now)).as("to be read again after its pause").isFalse();
        assertThat(BackfillRunner.waitsOn(null, true, 0, now)).isFalse();
    }

    @Test
    void aSnapshotHidesItsInProgressXidsAndEveryOneFromItsXmaxOnAs32BitXids() {
        Chunk.Unseen none = BackfillRunner.unseen("100:100:");
        assertThat(none.inProgress()).isEmpty();
        assertThat(none.hides(99)).isFalse();
        assertThat(none.hides(100)).as("xmax itself: not listed, not seen").isTrue();
        Chunk.Unseen some = BackfillRunner.unseen("100:105:100,103");
        assertThat(some.inProgress()).containsExactlyInAnyOrder(100L, 103L);
        assertThat(List.of(99L, 100L, 101L, 103L, 104L, 105L, 4000L).stream().filter(some::hides))
                .containsExactly(100L, 103L, 105L, 4000L);
        // an xid8 of epoch 1: the stream carries its lower 32 bits
        Chunk.Unseen epoch = BackfillRunner.unseen("4294967396:4294967400:4294967397");
        assertThat(epoch.inProgress()).containsExactly(101L);
        assertThat(epoch.hides(102)).isFalse();
        assertThat(epoch.hides(104)).isTrue();
        // near the 32-bit wrap: 4294967290 precedes 5 there
        Chunk.Unseen wrapped = BackfillRunner.unseen("8589934586:8589934597:");
        assertThat(wrapped.hides(4294967290L)).isFalse();
        assertThat(wrapped.hides(5)).isTrue();
        assertThat(wrapped.hides(4)).isFalse();
        assertThatThrownBy(() -> BackfillRunner.unseen("100")).hasMessageContaining("100");
    }

    @Test
    void a32BitXidIsWidenedToThe64BitOneNearTheSnapshotsXmax() {
        assertThat(BackfillRunner.widened(5, 4294967396L)).as("epoch 1").isEqualTo(4294967301L);
        assertThat(BackfillRunner.widened(4294967290L, 4294967300L)).as("just before the epoch's start").isEqualTo(4294967290L);
        assertThat(BackfillRunner.widened(10, 8589934590L)).as("just after the next one's").isEqualTo(8589934602L);
        assertThat(BackfillRunner.widened(100, 100)).isEqualTo(100);
    }

    @Test
    void ofTheTransactionsWaitingForAStandbyOnlyThoseTheSnapshotDoesNotSeeCount() {
        Chunk.Unseen unseen = BackfillRunner.unseen("100:105:100,103").committedBefore(Set.of(99L, 100L, 104L, 106L));
        assertThat(unseen.committedBefore()).containsExactlyInAnyOrder(100L, 106L);
    }

    @Test
    void rowsAreFetchedOneAtATimeUntilTheirSizeIsKnownThenAsManyAsAQuarterOfAChunksBytesHold() {
        assertThat(BackfillRunner.fetchSize(0)).isEqualTo(1);
        assertThat(BackfillRunner.fetchSize(200)).isEqualTo(BackfillRunner.MAX_FETCH);
        assertThat(BackfillRunner.fetchSize(20_000)).isEqualTo((int) (BackfillRunner.CHUNK_BYTES / 4 / 20_000));
        assertThat(BackfillRunner.fetchSize(10L << 20)).isEqualTo(1);
    }

    @Test
    void anErrorIsOneBackfillsOwnUnlessItIsTheConnectionsOrTheServersAsAWhole() {
        assertThat(BackfillRunner.ownError(new java.sql.SQLException("row 150 is sealed", "P0001"))).isTrue();
        assertThat(BackfillRunner.ownError(new java.sql.SQLException("could not open relation", "XX000"))).isTrue();
        assertThat(BackfillRunner.ownError(new java.sql.SQLException("connection refused", "08001"))).isFalse();
        assertThat(BackfillRunner.ownError(new java.sql.SQLException("read-only transaction", "25006"))).isFalse();
        assertThat(BackfillRunner.ownError(new java.sql.SQLException("deadlock", "40P01"))).isFalse();
        assertThat(BackfillRunner.ownError(new java.sql.SQLException("out of memory", "53200"))).isFalse();
        assertThat(BackfillRunner.ownError(new java.sql.SQLException("terminating connection", "57P01"))).isFalse();
        assertThat(BackfillRunner.ownError(new java.sql.SQLException("I/O error", "58030"))).isFalse();
        assertThat(BackfillRunner.ownError(new java.sql.SQLException("no state"))).as("pgjdbc's own").isFalse();
    }

    /**
     * At shutdown the container goes after the runner was told to stop: a round under way meets a
     * data source that is gone. That is the stop's doing, not a defect to report with a stack trace.
     */
    @Test
    void aRoundFailingAfterTheStopIsNotReported() throws Exception {
        try (io.walhook.source.SourceFixture source = new io.walhook.source.SourceFixture(
                io.walhook.testing.TestPostgres.shared(), "runner_stops");
                io.walhook.testing.LogLines log = new io.walhook.testing.LogLines(BackfillRunner.class)) {
            java.util.concurrent.CountDownLatch entered = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.atomic.AtomicBoolean gone = new java.util.concurrent.atomic.AtomicBoolean();
            javax.sql.DataSource real = source.dataSource;
            javax.sql.DataSource goingAway = (javax.sql.DataSource) java.lang.reflect.Proxy.newProxyInstance(
                    getClass().getClassLoader(), new Class<?>[] {javax.sql.DataSource.class}, (proxy, method, args) -> {
                        if (method.getName().equals("getConnection") && gone.get()) {
                            entered.countDown();
                            boolean interrupted = false;
                            while (true) { // as a JDBC call does, it does not end at an interrupt
                                try {
                                    release.await();
                                    break;
                                } catch (InterruptedException e) {
                                    interrupted = true;
                                }
                            }
                            if (interrupted) {
                                Thread.currentThread().interrupt();
                            }
                            throw new IllegalStateException("ArC container not initialized");
                        }
                        try {
                            return method.invoke(real, args);
                        } catch (java.lang.reflect.InvocationTargetException e) {
                            throw e.getCause();
                        }
                    });
            BackfillRunner runner = new BackfillRunner(new BackfillRunner.Settings(
                    source.server.jdbcUrl(source.database), source.server.user(), source.server.password(), "walhook",
                    "walhook", java.time.Duration.ofMillis(500), java.time.Duration.ofSeconds(30)),
                    new BackfillStore(goingAway, "walhook"), new Watermarks(), List::of, id -> false,
                    BackfillRunner.Counter.NONE);
            Thread thread = new Thread(runner, "test-backfill");
            thread.start();
            gone.set(true);
            runner.wake();
            assertThat(entered.await(30, java.util.concurrent.TimeUnit.SECONDS)).as("a round under way").isTrue();
            runner.stop();
            thread.interrupt();
            release.countDown();
            thread.join(30_000);
            assertThat(thread.isAlive()).as("the runner ended").isFalse();
            assertThat(log.lines()).as("what the runner logged").isEmpty();
        }
    }

    /**
     * Six backfills under way at once, of tables of large rows, with nothing delivering their chunks
     * (the stream behind): each held two chunks of its own, 16 MB, together 96 MB and more of a heap
     * a small deployment sizes at 256 MB. Together they now hold at most {@code ALL_CHUNK_BYTES} and
     * the one chunk read last; and a backfill whose subscription is held out of force gives its
     * chunks up while it waits, rather than hold others' place.
     */
    @Test
    void theChunksOfBackfillsUnderWayTogetherHoldABoundedShareOfTheHeap() throws Exception {
        try (io.walhook.source.SourceFixture source = new io.walhook.source.SourceFixture(
                io.walhook.testing.TestPostgres.shared(), "runner_memory")) {
            List<io.walhook.routing.Subscription> subscriptions = new java.util.ArrayList<>();
            BackfillStore store = new BackfillStore(source.dataSource, "walhook");
            for (int t = 0; t < 6; t++) {
                // 240 rows of 50,000 characters: three chunks' worth each
                source.sql("CREATE TABLE big" + t + " (id int PRIMARY KEY, doc text NOT NULL)",
                        "INSERT INTO big" + t + " SELECT g, repeat(md5(g::text), 1563) FROM generate_series(1, 240) g");
                io.walhook.routing.Subscription tenant = new io.walhook.routing.Subscription("config:big" + t, "big" + t,
                        List.of(io.walhook.routing.TablePattern.parse("public.big" + t)), Set.of(io.walhook.change.Operation.values()),
                        java.util.Optional.empty(), new io.walhook.routing.Destination.Webhook(java.net.URI.create("http://receiver/h"),
                        List.of(), java.util.Map.of()), io.walhook.routing.EventFormat.JSON, 1, 0, io.walhook.routing.Projection.ALL,
                        false, io.walhook.routing.RetryPolicy.DEFAULTS, null);
                subscriptions.add(tenant);
            }
            source.prepare("*");
            java.util.concurrent.atomic.AtomicBoolean heldOut = new java.util.concurrent.atomic.AtomicBoolean();
            for (io.walhook.routing.Subscription tenant : subscriptions) {
                assertThat(store.insertInitial(tenant.id(), List.of("public." + tenant.name()))).isTrue();
            }
            BackfillRunner runner = new BackfillRunner(new BackfillRunner.Settings(
                    source.server.jdbcUrl(source.database), source.server.user(), source.server.password(), "walhook",
                    "walhook", java.time.Duration.ofMillis(500), java.time.Duration.ofSeconds(30)),
                    store, new Watermarks(), () -> heldOut.get() ? List.of() : subscriptions, id -> heldOut.get(),
                    BackfillRunner.Counter.NONE);
            Thread thread = new Thread(runner, "test-backfill");
            thread.start();
            try {
                runner.wake();
                await().atMost(java.time.Duration.ofSeconds(60))
                        .until(() -> runner.chunkBytes() >= 3 * BackfillRunner.CHUNK_BYTES);
                // what they read, the stream never meeting their high watermarks, stays; no more is read past the bound
                await().during(java.time.Duration.ofSeconds(5)).atMost(java.time.Duration.ofSeconds(60))
                        .until(() -> runner.chunkBytes() <= BackfillRunner.ALL_CHUNK_BYTES + BackfillRunner.CHUNK_BYTES + (1 << 20));
                // their subscriptions held out of force (another instance's newer walhook wrote them, say): their
                // backfills wait, and give their chunks up, read again later; kept, those held every other's place
                heldOut.set(true);
                runner.wake();
                await().atMost(java.time.Duration.ofSeconds(30)).until(() -> runner.chunkBytes() == 0);
            } finally {
                runner.stop();
                thread.interrupt();
                thread.join(30_000);
            }
        }
    }

    /**
     * A row moved out of a backfill's reach holds the update that moved it unacknowledged until the
     * row is saved, and a save the state database refuses is tried again, the update still held.
     * Let go at once, the update was acknowledged while the row lived in memory alone, and a restart
     * before the row was read again lost it.
     */
    @Test
    void aRowMovedHoldsItsUpdateUnacknowledgedUntilItIsSaved() throws Exception {
        try (io.walhook.source.SourceFixture source = new io.walhook.source.SourceFixture(
                io.walhook.testing.TestPostgres.shared(), "runner_moved")) {
            source.sql("CREATE TABLE items (id int PRIMARY KEY, doc text)");
            source.prepare("*");
            BackfillStore store = new BackfillStore(source.dataSource, "walhook");
            assertThat(store.insertInitial("config:items", List.of("public.items"))).isTrue();
            UUID backfill = store.unfinished().get(0).id();
            // paused: nothing is read, its moves wait for it
            assertThat(store.transition(backfill, List.of(Backfill.State.RUNNING), Backfill.State.PAUSED, null)).isTrue();
            SnapshotTable items;
            try (java.sql.Connection c = source.dataSource.getConnection()) {
                items = SnapshotTable.describe(c, "public.items", "walhook", "walhook");
            }
            Watermarks watermarks = new Watermarks();
            watermarks.watch(backfill, new Watermarks.Watch(items.oid(), "public.items", List.of("id")));
            java.util.concurrent.atomic.AtomicInteger released = new java.util.concurrent.atomic.AtomicInteger();
            io.walhook.delivery.RoutingLoop.Reads reads = new io.walhook.delivery.RoutingLoop.Reads() {
                @Override
                public io.walhook.routing.Subscription subscription(String id) {
                    return null;
                }

                @Override
                public void send(io.walhook.routing.Subscription subscription, io.walhook.change.ChangeEvent event,
                        Runnable done) {
                    throw new AssertionError("nothing to send");
                }

                @Override
                public Runnable hold() {
                    return released::incrementAndGet;
                }
            };
            source.sql("ALTER TABLE walhook.backfill_moved RENAME TO backfill_moved_away");
            BackfillRunner runner = new BackfillRunner(new BackfillRunner.Settings(
                    source.server.jdbcUrl(source.database), source.server.user(), source.server.password(), "walhook",
                    "walhook", java.time.Duration.ofMillis(500), java.time.Duration.ofSeconds(30)),
                    store, watermarks, List::of, id -> true, BackfillRunner.Counter.NONE);
            Thread thread = new Thread(runner, "test-backfill");
            thread.start();
            try {
                // UPDATE items SET id = 2 WHERE id = 1, doc TOASTed and unchanged
                io.walhook.change.RelationInfo relation = io.walhook.change.RelationInfo.described(items.relation(),
                        new io.walhook.change.ValueConverters(), items.userTypes()::get, null);
                watermarks.observe(io.walhook.change.TestEvents.update(relation,
                        io.walhook.pgoutput.TupleData.builder().text("1").nullValue().build(), null,
                        io.walhook.pgoutput.TupleData.builder().text("2").unchangedToast().build(),
                        new io.walhook.change.TxInfo(900, io.walhook.pgoutput.Lsn.of(0x2000), java.time.Instant.EPOCH)), reads);
                await().during(java.time.Duration.ofSeconds(2)).atMost(java.time.Duration.ofSeconds(10))
                        .until(() -> released.get() == 0);

                source.sql("ALTER TABLE walhook.backfill_moved_away RENAME TO backfill_moved");
                await().atMost(java.time.Duration.ofSeconds(30)).until(() -> released.get() == 1);
                assertThat(store.moved(backfill, 10)).containsExactly(new Watermarks.Moved(backfill, "public.items", List.of("2"),
                        io.walhook.pgoutput.Lsn.of(0x2000)));
            } finally {
                runner.stop();
                thread.interrupt();
                thread.join(30_000);
            }
        }
    }

    @Test
    void itsSettingsNeverShowThePassword() {
        BackfillRunner.Settings settings = new BackfillRunner.Settings("jdbc:postgresql://db:5432/orders", "app",
                "Zq9-pa55", "walhook", "walhook", java.time.Duration.ofMillis(500), java.time.Duration.ofSeconds(30));
        assertThat(settings.toString()).contains("db:5432").doesNotContain("Zq9-pa55");
    }
}
