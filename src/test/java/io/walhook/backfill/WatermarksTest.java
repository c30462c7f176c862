package io.walhook.backfill;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.walhook.change.ChangeEvent;
import io.walhook.change.Operation;
import io.walhook.change.TestEvents;
import io.walhook.delivery.RoutingLoop;
import io.walhook.pgoutput.TupleData;
import io.walhook.routing.Subscription;
import io.walhook.routing.TestSubscriptions;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;

/**
 * Giving up on a chunk against the stream meeting its high watermark: whichever comes first wins,
 * so a chunk is either read again or sent, never both. The table is described by a real PostgreSQL.
 */
class WatermarksTest {

    private static SnapshotTable table;
    /** Twenty other tables, as the stream describes them (more than a transaction's tables kept in an array). */
    private static final List<io.walhook.change.RelationInfo> OTHERS = new ArrayList<>();

    @BeforeAll
    static void describe() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("watermarks");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int)", "CREATE PUBLICATION p FOR ALL TABLES");
        for (int t = 0; t < 20; t++) {
            pg.execute(database, "CREATE TABLE other_" + t + " (id int PRIMARY KEY)");
        }
        try (Connection c = pg.connect(database)) {
            table = SnapshotTable.describe(c, "public.items", "p", "walhook");
            for (int t = 0; t < 20; t++) {
                OTHERS.add(relation(SnapshotTable.describe(c, "public.other_" + t, "p", "walhook")));
            }
        }
    }

    private static io.walhook.change.RelationInfo relation(SnapshotTable described) {
        return io.walhook.change.RelationInfo.described(described.relation(), new io.walhook.change.ValueConverters(),
                described.userTypes()::get, null);
    }

    /** A change to a row of {@code relation} by transaction {@code xid}, as the stream delivers it. */
    private static ChangeEvent change(io.walhook.change.RelationInfo relation, long xid) {
        return ChangeEvent.read(relation, TupleData.builder().text("7").text("2").build(),
                new io.walhook.change.TxInfo(xid, io.walhook.pgoutput.Lsn.of(0x1000), java.time.Instant.EPOCH), "stream",
                "change-" + xid);
    }

    /**
     * An update that moves a row of the table a backfill reads to another key, leaving out a TOASTed
     * value its old image does not hold, has the row read again at its new key (the consumer may
     * never have had the value); no other update does.
     */
    @Test
    void aRowMovedToAnotherKeyLeavingItsToastedValueOutIsToBeReadAgainThere() throws Exception {
        Watermarks watermarks = new Watermarks();
        List<Watermarks.Moved> moved = new ArrayList<>();
        watermarks.onMoved((m, saved) -> moved.add(m));
        UUID backfill = UUID.randomUUID();
        io.walhook.change.RelationInfo items = relation(table);
        io.walhook.change.TxInfo tx = new io.walhook.change.TxInfo(900, io.walhook.pgoutput.Lsn.of(0x2000),
                java.time.Instant.EPOCH);
        TupleData oldKey = TupleData.builder().text("150").nullValue().build();
        Reads reads = new Reads();
        watermarks.observe(TestEvents.update(items, oldKey, null, TupleData.builder().text("50").unchangedToast().build(), tx),
                reads);
        assertThat(moved).as("no backfill reads the table").isEmpty();

        watermarks.watch(backfill, new Watermarks.Watch(table.oid(), "public.items", List.of("id")));
        watermarks.observe(TestEvents.update(items, oldKey, null, TupleData.builder().text("50").unchangedToast().build(), tx),
                reads);
        assertThat(moved).singleElement().satisfies(m -> {
            assertThat(m.backfillId()).isEqualTo(backfill);
            assertThat(m.table()).isEqualTo("public.items");
            assertThat(m.key()).containsExactly("50");
            assertThat(m.lsn()).isEqualTo(io.walhook.pgoutput.Lsn.of(0x2000));
        });
        moved.clear();
        // its key kept (no old image), every value sent, the value in its old row (REPLICA IDENTITY FULL), or a
        // 'K' tuple sent for a TOASTed key that did not change: nothing to read again
        watermarks.observe(TestEvents.update(items, null, null, TupleData.builder().text("50").unchangedToast().build(), tx),
                reads);
        watermarks.observe(TestEvents.update(items, oldKey, null, TupleData.builder().text("50").text("3").build(), tx), reads);
        watermarks.observe(TestEvents.update(items, null, TupleData.builder().text("150").text("3").build(),
                TupleData.builder().text("50").unchangedToast().build(), tx), reads);
        watermarks.observe(TestEvents.update(items, TupleData.builder().text("50").nullValue().build(), null,
                TupleData.builder().text("50").unchangedToast().build(), tx), reads);
        assertThat(moved).isEmpty();

        watermarks.unwatch(backfill::equals);
        watermarks.observe(TestEvents.update(items, oldKey, null, TupleData.builder().text("50").unchangedToast().build(), tx),
                reads);
        assertThat(moved).isEmpty();
        assertThat(reads.sent).isEmpty();
    }

    /** What the routing thread sends of a chunk, to the one subscription there is. */
    private static class Reads implements RoutingLoop.Reads {
        final Subscription subscription = TestSubscriptions.routed("all", "*", Set.of(Operation.values()), null);
        final List<ChangeEvent> sent = new ArrayList<>();
        final List<Runnable> done = new ArrayList<>();

        @Override
        public Subscription subscription(String id) {
            return subscription.id().equals(id) ? subscription : null;
        }

        @Override
        public void send(Subscription to, ChangeEvent event, Runnable delivered) {
            sent.add(event);
            done.add(delivered);
        }

        @Override
        public Runnable hold() {
            return () -> { };
        }
    }

    private static Chunk chunk(Reads reads, String token) {
        Chunk chunk = new Chunk(token, UUID.randomUUID(), reads.subscription.id(), table, null, null);
        chunk.rows = List.of(new Chunk.Row("7", "row-7", TupleData.builder().text("7").text("1").build()));
        chunk.unseen = BackfillRunner.unseen("100:100:");
        return chunk;
    }

    private static ChangeEvent watermark(String content) {
        return TestEvents.message(Watermarks.PREFIX, content.getBytes(StandardCharsets.UTF_8), true);
    }

    @Test
    void aChunkGivenUpBeforeTheStreamMeetsItsHighWatermarkIsReadAgainAndItsLateWatermarksAreIgnored() throws Exception {
        Watermarks watermarks = new Watermarks();
        Reads reads = new Reads();
        Chunk chunk = chunk(reads, "t1");
        watermarks.expect(chunk);
        assertThat(watermarks.awaiting(chunk)).isTrue();
        assertThat(watermarks.observe(watermark(Watermarks.LOW + "t1"), reads)).isTrue();

        assertThat(watermarks.abandon(chunk, "a test's reason")).isTrue();
        assertThat(chunk.outcome.getNow(null).again()).isTrue();
        assertThat(chunk.outcome.getNow(null).why()).isEqualTo("a test's reason");
        assertThat(watermarks.awaiting(chunk)).isFalse();
        assertThat(watermarks.observe(watermark(Watermarks.HIGH + "t1"), reads)).as("still walhook's own").isTrue();
        assertThat(reads.sent).as("its rows are read again, not sent").isEmpty();
        assertThat(watermarks.abandon(chunk)).as("once").isFalse();
    }

    @Test
    void aChunkTheStreamTookAtItsHighWatermarkIsNotGivenUpButSent() throws Exception {
        Watermarks watermarks = new Watermarks();
        Reads reads = new Reads();
        Chunk chunk = chunk(reads, "t2");
        watermarks.expect(chunk);
        watermarks.observe(watermark(Watermarks.LOW + "t2"), reads);
        watermarks.observe(watermark(Watermarks.HIGH + "t2"), reads);
        assertThat(reads.sent).extracting(ChangeEvent::op).containsExactly(Operation.READ);
        assertThat(watermarks.awaiting(chunk)).isFalse();

        // the runner's connection broke just after the commit: too late, its rows are on their way
        assertThat(watermarks.abandon(chunk)).isFalse();
        assertThat(chunk.outcome).isNotDone();
        reads.done.forEach(Runnable::run);
        assertThat(chunk.outcome.getNow(null)).isEqualTo(new Chunk.Outcome(1));
    }

    /**
     * The stream meets a chunk's high watermark while its subscription leaves the table out: the
     * chunk ends so (the runner counts the table done, or reads the chunk again if the table was
     * taken back meanwhile), not as a chunk whose rows were all sent (its rows were never sent; the
     * runner read on after it, and a table taken back ended done without them).
     */
    @Test
    void aChunkMetWhileItsSubscriptionLeavesItsTableOutEndsSoNotAsSent() throws Exception {
        Watermarks watermarks = new Watermarks();
        Reads reads = new Reads() {
            final Subscription narrowed = TestSubscriptions.routed("all", "public.other", Set.of(Operation.values()), null);

            @Override
            public Subscription subscription(String id) {
                return subscription.id().equals(id) ? narrowed : null;
            }
        };
        Chunk chunk = new Chunk("t6", UUID.randomUUID(), reads.subscription.id(), table, null, null);
        chunk.rows = List.of(new Chunk.Row("7", "row-7", TupleData.builder().text("7").text("1").build()));
        chunk.unseen = BackfillRunner.unseen("100:100:");
        watermarks.expect(chunk);
        watermarks.observe(watermark(Watermarks.LOW + "t6"), reads);
        watermarks.observe(watermark(Watermarks.HIGH + "t6"), reads);
        assertThat(reads.sent).isEmpty();
        assertThat(chunk.outcome.getNow(null)).isEqualTo(Chunk.Outcome.LEFT_OUT);
        assertThat(chunk.outcome.getNow(null).sent()).isZero();
    }

    /**
     * One transaction going back and forth between other tables thousands of times (orders and
     * their lines, imported together) pushed a transaction the chunk's snapshot did not see out of
     * the recent ones: the chunk, read without that transaction's change, was sent after it. Each
     * transaction's tables are recorded once, two of them as twenty.
     */
    @Test
    void aTransactionGoingBackAndForthBetweenTablesDoesNotPushAnotherOutOfTheRecentOnes() throws Exception {
        Watermarks watermarks = new Watermarks();
        Reads reads = new Reads();
        watermarks.observe(change(relation(table), 995), reads);
        for (int n = 0; n < Watermarks.RECENT; n++) {
            watermarks.observe(change(OTHERS.get(n % 2), 996), reads);
        }
        for (int n = 0; n < Watermarks.RECENT; n++) {
            watermarks.observe(change(OTHERS.get(n % OTHERS.size()), 997), reads);
        }
        Chunk chunk = chunk(reads, "t7");
        chunk.unseen = BackfillRunner.unseen("990:1000:995");
        watermarks.expect(chunk);
        watermarks.observe(watermark(Watermarks.LOW + "t7"), reads);
        watermarks.observe(watermark(Watermarks.HIGH + "t7"), reads);
        assertThat(reads.sent).as("read again, not sent").isEmpty();
        assertThat(chunk.outcome.getNow(null).again()).isTrue();
        assertThat(chunk.outcome.getNow(null).why()).startsWith("its snapshot did not see transaction 995, which the stream"
                + " delivered before its low watermark");
    }

    /**
     * A chunk given up after the stream opened its window, its backfill then failing so that no
     * watermark came after it: the window stayed open, and every later change to its table added
     * its key to the chunk, without bound. Given up, its window closes at the next change.
     */
    /**
     * A change whose old key image lacks the chunk's key columns (sent as NULL: a partition whose
     * replica identity is another index than its root's, published through the root) names its
     * row by the columns it has: a row of the chunk that has them is dropped, others are sent.
     * Before, the image was passed over, and a row deleted in the window was sent at the high
     * watermark, after its delete, as a read. An image with no column at all has the chunk read
     * again.
     */
    @Test
    void aChangeWhoseKeyImageLacksTheChunkKeyDropsTheRowThatHasItsOtherColumns() {
        // the chunk's row 7 has n = 1; the partition's identity is n
        TestEvents.Table partition = TestEvents.table("public", "items").column("id", TestEvents.INT4)
                .key("n", TestEvents.INT4);
        Chunk chunk = chunk(new Reads(), "t9");
        chunk.touched(partition.delete(null, "1"));
        assertThat(chunk.consistent()).isTrue();
        assertThat(chunk.changed(chunk.rows.get(0))).as("the row deleted is the one it read").isTrue();

        Chunk other = chunk(new Reads(), "t10");
        other.touched(partition.delete(null, "5"));
        assertThat(other.consistent()).isTrue();
        assertThat(other.changed(other.rows.get(0))).as("another row's delete").isFalse();

        Chunk blind = chunk(new Reads(), "t11");
        blind.touched(partition.delete(null, null));
        assertThat(blind.consistent()).as("nothing to tell its row by").isFalse();
    }

    @Test
    void aChunkGivenUpAfterItsWindowOpenedStopsCollectingChanges() throws Exception {
        Watermarks watermarks = new Watermarks();
        Reads reads = new Reads();
        Chunk chunk = chunk(reads, "t8");
        watermarks.expect(chunk);
        watermarks.observe(watermark(Watermarks.LOW + "t8"), reads);
        assertThat(watermarks.openWindows()).isEqualTo(1);
        assertThat(watermarks.abandon(chunk)).isTrue();
        watermarks.observe(change(relation(table), 997), reads);
        assertThat(watermarks.openWindows()).isZero();
    }

    /**
     * A transaction that got its xid after the snapshot's latest completed one, and wrote its commit
     * before the low watermark, is not listed in progress but was not seen either: the chunk, read
     * without its change, is read again rather than sent after it.
     */
    @Test
    void aChunkWhoseSnapshotDidNotSeeAChangeTheStreamDeliveredBeforeItsLowWatermarkIsReadAgain() {
        Reads reads = new Reads();
        Chunk listed = chunk(reads, "t3");
        listed.unseen = BackfillRunner.unseen("990:1000:995");
        listed.opened(new long[] {995}, new long[] {table.oid()});
        assertThat(listed.missedBefore() >= 0).as("in progress").isTrue();

        Chunk beyond = chunk(reads, "t4");
        beyond.unseen = BackfillRunner.unseen("1000:1000:");
        beyond.opened(new long[] {999, 1000}, new long[] {table.oid(), table.oid()});
        assertThat(beyond.missedBefore() >= 0).as("from xmax on").isTrue();

        Chunk seen = chunk(reads, "t5");
        seen.unseen = BackfillRunner.unseen("1000:1000:");
        seen.opened(new long[] {999, 1000}, new long[] {table.oid(), table.oid() + 1});
        assertThat(seen.missedBefore() >= 0).as("seen, or another table's").isFalse();
    }

    /**
     * A transaction whose commit another walhook delivered (or this one, before a restart), still
     * in progress for the chunk's snapshot while it waits for a synchronous standby: the stream of
     * this one never carries it, so the chunk is read again. One the stream delivered before the
     * low watermark is told by its table; one it delivers between the watermarks takes its rows
     * out of the chunk.
     */
    @Test
    void aChunkWhoseSnapshotDidNotSeeACommittedTransactionTheStreamNeverDeliveredIsReadAgain() throws Exception {
        Watermarks watermarks = new Watermarks();
        Reads reads = new Reads();
        watermarks.observe(change(OTHERS.get(0), 994), reads);
        Chunk unheard = chunk(reads, "t9");
        unheard.unseen = BackfillRunner.unseen("990:1000:993,995").committedBefore(java.util.Set.of(993L));
        Chunk before = chunk(reads, "t10");
        before.unseen = BackfillRunner.unseen("990:1000:994").committedBefore(java.util.Set.of(994L));
        Chunk between = chunk(reads, "t11");
        between.unseen = BackfillRunner.unseen("990:1000:995").committedBefore(java.util.Set.of(995L));
        for (Chunk chunk : List.of(unheard, before, between)) {
            watermarks.expect(chunk);
            watermarks.observe(watermark(Watermarks.LOW + chunk.token), reads);
        }
        watermarks.observe(change(OTHERS.get(1), 995), reads);
        for (Chunk chunk : List.of(unheard, before, between)) {
            watermarks.observe(watermark(Watermarks.HIGH + chunk.token), reads);
        }
        assertThat(unheard.outcome.getNow(null).again()).as("never delivered here").isTrue();
        assertThat(unheard.outcome.getNow(null).why()).contains("SyncRep");
        assertThat(before.outcome.isDone()).as("delivered before the low watermark, another table's").isFalse();
        assertThat(between.outcome.isDone()).as("delivered between the watermarks").isFalse();
        assertThat(reads.sent).hasSize(2);
    }
}
