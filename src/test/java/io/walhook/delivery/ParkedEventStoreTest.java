package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import io.walhook.pgoutput.Lsn;
import io.walhook.source.SourceFixture;
import io.walhook.testing.TestPostgres;

/** A lane's page of its durable queue, on a real PostgreSQL: bounded in rows and in the bytes of its bodies. */
class ParkedEventStoreTest {

    private static final String ID = "6f1c2b6e-0000-4000-8000-0000000000aa";

    private SourceFixture database;
    private ParkedEventStore store;

    @BeforeEach
    void start() throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "parked");
        store = new ParkedEventStore(database.dataSource, "walhook");
        // bodies of 100, 200, 300, 400 and 500 bytes, in this order
        List<ParkedEventStore.Entry> entries = new ArrayList<>();
        for (int i = 1; i <= 5; i++) {
            entries.add(new ParkedEventStore.Entry("event-" + i, Lsn.of(0x1000L * i), Instant.EPOCH, "application/json",
                    Map.of(), null, new byte[100 * i], null, null));
        }
        store.append(ID, "pages", entries, 0, null);
    }

    @AfterEach
    void stop() throws Exception {
        database.close();
    }

    private List<String> ids(ParkedEventStore.Synced synced) {
        return synced.page().stream().map(ParkedEventStore.Parked::eventId).toList();
    }

    @Test
    void droppingAQueueWaitsAsLongAsItTakesThoughTheSessionGivesUpOnSilenceSooner() throws Exception {
        // the pool's sessions give up on a server silent for their socket timeout, and the server cancels their
        // statements sooner (SessionTimeout): 2 s and 1 s here
        org.postgresql.ds.PGSimpleDataSource impatient = database.limited(2, 1000);
        ParkedEventStore impatientStore = new ParkedEventStore(impatient, "walhook");
        try (java.sql.Connection locker = database.dataSource.getConnection();
             java.sql.Statement s = locker.createStatement()) {
            locker.setAutoCommit(false);
            s.execute("SELECT 1 FROM walhook.parked_event WHERE event_id = 'event-3' FOR UPDATE"); // as a lane's round does
            java.util.concurrent.CompletableFuture<Integer> dropped = dropping(impatientStore);
            // twice the session's limit
            org.awaitility.Awaitility.await().pollDelay(java.time.Duration.ofSeconds(4)).until(() -> true);
            assertThat(dropped).as("waits for the lock").isNotDone();
            locker.commit();
            assertThat(dropped.get(1, java.util.concurrent.TimeUnit.MINUTES)).isEqualTo(5);
        }
    }

    /**
     * A queue dropped while another session holds one of its rows (a lane's statement, an operator's
     * transaction): the rest is deleted and committed chunk by chunk, not held locked until the held
     * row is free. One statement held every row it deleted, and the lane's own statements on them
     * (deleting what it delivered) waited for the whole drop, its memory full and routing held back
     * for every subscription meanwhile.
     */
    @Test
    void droppingAQueueDoesNotHoldTheRowsItDeletedWhileAnotherIsHeld() throws Exception {
        try (java.sql.Connection locker = database.dataSource.getConnection();
             java.sql.Statement s = locker.createStatement()) {
            locker.setAutoCommit(false);
            s.execute("SELECT 1 FROM walhook.parked_event WHERE event_id = 'event-5' FOR UPDATE");
            java.util.concurrent.CompletableFuture<Integer> dropped = dropping(store);
            // gone for every other session while the held one waits
            org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(10)).until(() -> queued() == 1);
            assertThat(dropped).as("waits for the held row").isNotDone();
            locker.commit();
            assertThat(dropped.get(1, java.util.concurrent.TimeUnit.MINUTES)).isEqualTo(5);
            assertThat(queued()).isZero();
        }
    }

    /**
     * Each run records where its stream resumed: a row queued before this run is followed only by
     * resends at or after the earliest position of this run and the runs after the row's, as a
     * resend an earlier run queued is only as old as its own run's position; rows no recorded run
     * wrote (queued by a walhook before runs were recorded) may be followed by anything. Once the
     * rows a run wrote are gone, its position is forgotten.
     */
    @Test
    void aRowQueuedBeforeIsFollowedByResendsAsOldAsTheRunsAfterItResumedFrom() throws Exception {
        long[] ids = ids();
        assertThat(run(0x5000).resendsFrom(ids[0])).as("the rows of start(): written before runs were recorded").isZero();
        store.deleteAll(ID);

        ParkedEventStore first = run(0x4000);
        first.append(ID, "pages", List.of(entry("first", 0x4000)), 0, null);
        long firstRow = ids()[0];
        assertThat(run(0x9000).resendsFrom(firstRow)).as("no run between the row's and this one").isEqualTo(0x9000);
        ParkedEventStore second = run(0x9000);
        second.append(ID, "pages", List.of(entry("resent", 0x9000)), 0, null);
        long secondRow = ids()[1];
        ParkedEventStore third = run(0xA000);
        assertThat(third.resendsFrom(firstRow)).as("the second run's resend may be older than this one's position")
                .isEqualTo(0x9000);
        assertThat(third.resendsFrom(secondRow)).as("no run since the second's").isEqualTo(0xA000);
        assertThat(run(0x3000).resendsFrom(firstRow)).as("its own position when earlier").isEqualTo(0x3000);
        assertThat(run(-1L).resendsFrom(firstRow)).as("a history left: no row written before counts").isEqualTo(-1L);
        assertThat(runs()).as("runs that wrote nothing share their first id: the latest is kept").hasSize(3);

        store.deleteAll(ID);
        assertThat(run(0xB000).resendsFrom(secondRow)).as("nothing queued: no earlier run's resend is left")
                .isEqualTo(0xB000);
        assertThat(runs()).as("the runs that wrote nothing left are forgotten").hasSize(1);
    }

    /** The queue's row ids, oldest first. */
    private long[] ids() throws Exception {
        List<Long> ids = new ArrayList<>();
        try (java.sql.Connection c = database.dataSource.getConnection();
             java.sql.ResultSet r = c.createStatement().executeQuery("SELECT id FROM walhook.parked_event ORDER BY id")) {
            while (r.next()) {
                ids.add(r.getLong(1));
            }
        }
        return ids.stream().mapToLong(Long::longValue).toArray();
    }

    private static ParkedEventStore.Entry entry(String eventId, long lsn) {
        return new ParkedEventStore.Entry(eventId, Lsn.of(lsn), Instant.EPOCH, "application/json", Map.of(), null,
                new byte[1], null, null);
    }

    /** A store as a run starting with its stream resumed from {@code position} finds it. */
    private ParkedEventStore run(long position) throws Exception {
        ParkedEventStore queues = new ParkedEventStore(database.dataSource, "walhook");
        queues.resumesFrom(position);
        queues.markRun();
        return queues;
    }

    private List<Long> runs() throws Exception {
        List<Long> positions = new ArrayList<>();
        try (java.sql.Connection c = database.dataSource.getConnection();
             java.sql.ResultSet r = c.createStatement().executeQuery("SELECT resumed_from FROM walhook.queue_run")) {
            while (r.next()) {
                positions.add(r.getLong(1));
            }
        }
        return positions;
    }

    /** A queue of several chunks, with a row held in the first: every row goes, and only the queue as it was. */
    @Test
    void droppingAQueueOfSeveralChunksTakesEveryRowUpToItsLastWhenAsked() throws Exception {
        List<ParkedEventStore.Entry> entries = new ArrayList<>();
        for (int i = 6; i <= 2 * ParkedEventStore.DELETE_CHUNK + 500; i++) {
            entries.add(new ParkedEventStore.Entry("event-" + i, Lsn.of(0x1000L * i), Instant.EPOCH, "application/json",
                    Map.of(), null, new byte[1], null, null));
        }
        store.append(ID, "pages", entries, 0, null);
        int queued = queued();
        try (java.sql.Connection locker = database.dataSource.getConnection();
             java.sql.Statement s = locker.createStatement()) {
            locker.setAutoCommit(false);
            s.execute("SELECT 1 FROM walhook.parked_event WHERE event_id = 'event-2' FOR UPDATE");
            java.util.concurrent.CompletableFuture<Integer> dropped = dropping(store);
            org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(30)).until(() -> queued() == 1);
            // queued while it is dropped: not the queue it was asked to drop
            store.append(ID, "pages", List.of(new ParkedEventStore.Entry("later", Lsn.of(0x100000000L), Instant.EPOCH,
                    "application/json", Map.of(), null, new byte[1], null, null)), 0, null);
            locker.commit();
            assertThat(dropped.get(1, java.util.concurrent.TimeUnit.MINUTES)).isEqualTo(queued);
        }
        assertThat(queued()).isEqualTo(1);
    }

    /**
     * Events dropped through the API are kept while the slot may send their changes again (a crash
     * before its acknowledged position passed them), to be settled unsent then, and let go once
     * every slot's acknowledged position passed them. A queue dropped with its deleted subscription
     * keeps none: its changes are not routed to it any more.
     */
    @Test
    void eventsDroppedThroughTheApiAreKeptUntilTheSlotsPositionPassesThem() throws Exception {
        List<Long> rows = new ArrayList<>();
        try (java.sql.Connection c = database.dataSource.getConnection(); java.sql.Statement s = c.createStatement();
             java.sql.ResultSet r = s.executeQuery("SELECT id FROM walhook.parked_event WHERE event_id IN ('event-1',"
                     + " 'event-2') ORDER BY id")) {
            while (r.next()) {
                rows.add(r.getLong(1));
            }
        }
        assertThat(store.drop(ID, rows)).isEqualTo(2);
        assertThat(store.drop(ID, null)).isEqualTo(3);
        assertThat(store.dropped().keys()).containsExactlyInAnyOrder(key(1), key(2), key(3), key(4), key(5));
        assertThat(store.dropped().lastCommit()).isEqualTo(0x5000);
        store.append("another", "other", List.of(new ParkedEventStore.Entry("event-9", Lsn.of(0x9000L), Instant.EPOCH,
                "application/json", Map.of(), null, new byte[1], null, null)), 0, null);
        assertThat(store.deleteAll("another")).isEqualTo(1);
        try (java.sql.Connection c = database.dataSource.getConnection(); java.sql.Statement s = c.createStatement()) {
            s.execute("SELECT pg_create_physical_replication_slot('parked_dropped')");
            try {
                // the acknowledged position of a slot that is gone holds nothing back
                s.execute("INSERT INTO walhook.checkpoint (slot_name, end_lsn) VALUES ('gone', '0/1')");
                assertThat(store.dropped().keys()).hasSize(5);
                // past the third change (its commit at 0/3000)
                s.execute("INSERT INTO walhook.checkpoint (slot_name, end_lsn) VALUES ('parked_dropped', '0/3001')");
                assertThat(store.dropped().keys()).containsExactlyInAnyOrder(key(4), key(5));
                try (java.sql.ResultSet r = s.executeQuery("SELECT count(*) FROM walhook.dropped_event")) {
                    r.next();
                    assertThat(r.getInt(1)).as("let go").isEqualTo(2);
                }
            } finally {
                s.execute("SELECT pg_drop_replication_slot('parked_dropped')");
            }
        }
    }

    private static String key(int event) {
        return ParkedEventStore.droppedKey(ID, "event-" + event);
    }

    /** The queue's drop, begun in the background. */
    private static java.util.concurrent.CompletableFuture<Integer> dropping(ParkedEventStore store) {
        return java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                return store.deleteAll(ID);
            } catch (java.sql.SQLException e) {
                throw new IllegalStateException(e);
            }
        });
    }

    /**
     * Once a change is parked, the slot's position passes it: its row in the queue is its only copy
     * and must reach the disk before it is acknowledged. With the server's synchronous_commit off,
     * the write committed in memory only, and a server crash before its WAL writer flushed took the
     * row with it while the slot had already moved on.
     */
    @Test
    void aParkedRowSurvivesACrashThatLosesUnflushedCommits() throws Exception {
        io.walhook.testing.EmbeddedPostgres pg = io.walhook.testing.EmbeddedPostgres.builder()
                .major(TestPostgres.defaultMajor()).unflushedCommits().start();
        try {
            SourceFixture own = new SourceFixture(pg, "parked_crash");
            ParkedEventStore crashing = new ParkedEventStore(own.dataSource, "walhook");
            pg.execute(own.database, "CHECKPOINT"); // the schema on disk
            pg.holdWalWriter();
            crashing.append(ID, "crash", List.of(new ParkedEventStore.Entry("parked", Lsn.of(0x2000L), Instant.EPOCH,
                    "application/json", Map.of(), null, new byte[10], null, null)), 1, "503");
            pg.crashLosingUnflushedCommits();
            assertThat(queuedAfterRecovery(pg, own.database)).as("the parked row after the crash").isEqualTo(1);
        } finally {
            pg.stop();
        }
    }

    /**
     * A row deleted as delivered must stay deleted: once the lane delivers directly again, the
     * row's next change goes to the receiver without the queue, and the slot's position passes it.
     * With the server's synchronous_commit off, a server crash before its WAL writer flushed brought
     * the delivered row back, to be delivered again after that newer change: the receiver was left
     * with the older state.
     */
    @Test
    void aRowDeletedAsDeliveredStaysDeletedThroughACrashThatLosesUnflushedCommits() throws Exception {
        io.walhook.testing.EmbeddedPostgres pg = io.walhook.testing.EmbeddedPostgres.builder()
                .major(TestPostgres.defaultMajor()).unflushedCommits().start();
        try {
            SourceFixture own = new SourceFixture(pg, "delivered_crash");
            ParkedEventStore crashing = new ParkedEventStore(own.dataSource, "walhook");
            crashing.append(ID, "crash", List.of(new ParkedEventStore.Entry("delivered", Lsn.of(0x2000L), Instant.EPOCH,
                    "application/json", Map.of(), null, new byte[10], null, null)), 1, "503");
            pg.execute(own.database, "CHECKPOINT"); // the schema and the row on disk
            pg.holdWalWriter();
            assertThat(crashing.sync(ID, List.of("delivered"), Map.of(), 0, 0, 0, false).deleted()).isEqualTo(1);
            pg.crashLosingUnflushedCommits();
            assertThat(queuedAfterRecovery(pg, own.database)).as("the delivered row after the crash").isZero();
        } finally {
            pg.stop();
        }
    }

    /** The queue's rows once the crashed server recovered by itself, from what its WAL writer had flushed. */
    private static int queuedAfterRecovery(io.walhook.testing.EmbeddedPostgres pg, String database) {
        int[] rows = {-1};
        org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(60)).ignoreExceptions().until(() -> {
            try (java.sql.Connection c = pg.connect(database); java.sql.Statement q = c.createStatement();
                 java.sql.ResultSet r = q.executeQuery("SELECT count(*) FROM walhook.parked_event")) {
                r.next();
                rows[0] = r.getInt(1);
                return true;
            }
        });
        return rows[0];
    }

    /** The subscription's queued rows, as any other session sees them. */
    private int queued() throws java.sql.SQLException {
        try (java.sql.Connection c = database.dataSource.getConnection();
             java.sql.PreparedStatement s = c.prepareStatement("SELECT count(*) FROM walhook.parked_event"
                     + " WHERE subscription_id = ?")) {
            s.setString(1, ID);
            try (java.sql.ResultSet r = s.executeQuery()) {
                r.next();
                return r.getInt(1);
            }
        }
    }

    @Test
    void theSubscriptionsWithQueuedEventsAreFoundOneProbeEach() throws Exception {
        List<String> others = List.of("00000000-0000-4000-8000-000000000001", "ffffffff-0000-4000-8000-000000000002",
                "config:hooks");
        for (String other : others) {
            store.append(other, "others", List.of(new ParkedEventStore.Entry("o-" + other, Lsn.of(0x9000), Instant.EPOCH,
                    "application/json", Map.of(), null, new byte[1], null, null)), 0, null);
        }
        List<String> expected = new ArrayList<>(others);
        expected.add(ID);
        assertThat(store.subscriptionsWithParkedEvents()).containsExactlyInAnyOrderElementsOf(expected);
        store.deleteAll(others.get(1));
        expected.remove(others.get(1));
        assertThat(store.subscriptionsWithParkedEvents()).containsExactlyInAnyOrderElementsOf(expected);
    }

    @Test
    void aPageHoldsTheRowsWhoseBodiesFitTogether() throws Exception {
        ParkedEventStore.Synced synced = store.sync(ID, List.of(), Map.of(), 0, 1000, 650, false);
        assertThat(ids(synced)).containsExactly("event-1", "event-2", "event-3"); // 600 bytes; the fourth would be 1,000
        assertThat(synced.more()).isTrue();
        long after = synced.page().get(2).id();
        assertThat(ids(store.sync(ID, List.of(), Map.of(), after, 1000, 5000, false))).containsExactly("event-4", "event-5");
    }

    @Test
    void aRowTooBigForThePageIsLeftForLaterAndSaysSo() throws Exception {
        ParkedEventStore.Synced synced = store.sync(ID, List.of(), Map.of(), 0, 1000, 50, false);
        assertThat(synced.page()).isEmpty();
        assertThat(synced.more()).as("rows are left, though none fitted").isTrue();
        // a lane with nothing in memory takes its next row whatever its size
        synced = store.sync(ID, List.of(), Map.of(), 0, 1000, 50, true);
        assertThat(ids(synced)).containsExactly("event-1");
        assertThat(synced.more()).isTrue();
    }

    @Test
    void aRowKeyHoldingANulCharacterIsQueuedAndFoundByItsKey() throws Exception {
        // a json column (which takes the escape of NUL, as jsonb does not) in a key of REPLICA IDENTITY FULL: the key
        // as the event's JSON writes it
        String nul = new com.fasterxml.jackson.databind.ObjectMapper().createObjectNode().put("doc", "a\u0000b").toString();
        assertThat(nul).isEqualTo("{\"doc\":\"a\\u0000b\"}");
        String text = "{\"doc\":\"a\\\\u0000b\"}"; // a backslash and "u0000" as text: another row
        store.append(ID, "pages", List.of(new ParkedEventStore.Entry("nul", Lsn.of(0x6000), Instant.EPOCH,
                "application/json", Map.of(), null, new byte[10], null, nul)), 0, null);
        store.append(ID, "pages", List.of(new ParkedEventStore.Entry("text", Lsn.of(0x7000), Instant.EPOCH,
                "application/json", Map.of(), null, new byte[10], null, text)), 0, null);
        assertThat(store.page(ID, 0, 10, java.util.Optional.of(nul), Long.MAX_VALUE).rows()).extracting(ParkedEventStore.Parked::eventId)
                .contains("nul");
        assertThat(store.page(ID, 0, 10, java.util.Optional.of(text), Long.MAX_VALUE).rows()).extracting(ParkedEventStore.Parked::eventId)
                .contains("text");
    }

    @Test
    void aQueuedEventKeepsTheAddressPartsOfItsEvent() throws Exception {
        String other = "6f1c2b6e-0000-4000-8000-0000000000ab";
        store.append(other, "amqp", List.of(new ParkedEventStore.Entry("parts", Lsn.of(0x8000), Instant.EPOCH,
                "application/json", Map.of(), "old.items", new byte[10], null, null,
                new String[] {"public", "items", "update"})), 0, null);
        ParkedEventStore.Parked row = store.sync(other, List.of(), Map.of(), 0, 10, 1 << 20, true).page().get(0);
        assertThat(row.address()).isEqualTo("old.items");
        assertThat(row.addressParts()).as("a replacing destination makes its own address of them")
                .containsExactly("public", "items", "update");
        assertThat(store.sync(ID, List.of(), Map.of(), 0, 1, 1 << 20, true).page().get(0).addressParts())
                .as("none kept").isNull();
    }

    @Test
    void theLastPageSaysNothingIsLeft() throws Exception {
        ParkedEventStore.Synced synced = store.sync(ID, List.of(), Map.of(), 0, 5, 1 << 20, false);
        assertThat(synced.page()).hasSize(5);
        assertThat(synced.more()).as("as many rows as the limit: more may be left").isTrue();
        long after = synced.page().get(4).id();
        synced = store.sync(ID, List.of(), Map.of(), after, 5, 1 << 20, true);
        assertThat(synced.page()).isEmpty();
        assertThat(synced.more()).isFalse();
        synced = store.sync(ID, List.of(), Map.of(), 0, 10, 1 << 20, false);
        assertThat(synced.page()).hasSize(5);
        assertThat(synced.more()).isFalse();
    }
}
