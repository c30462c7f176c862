package io.walhook.backfill;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.UUID;

import org.junit.jupiter.api.Test;

import io.walhook.source.SourceFixture;
import io.walhook.testing.TestPostgres;

/** Backfills as walhook's own table keeps them, against a real PostgreSQL. */
class BackfillStoreTest {

    private static final String SUBSCRIPTION = "config:orders";

    /**
     * {@code BACKFILL=initial} added to a configured subscription while a backfill of the API reads
     * one of its tables: the initial one leaves that table out, as the API refuses a second
     * backfill of it. Both read it, and every row of it was sent twice, under two ids.
     */
    @Test
    void theInitialBackfillLeavesOutATableAnUnfinishedBackfillReads() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "backfill_store")) {
            BackfillStore store = new BackfillStore(source.dataSource, "walhook");
            BackfillStore.Inserted api = store.insertUnlessBusy(SUBSCRIPTION, Backfill.API, List.of("public.orders"), null,
                    100, null);
            assertThat(api.backfill()).isNotNull();
            assertThat(store.insertInitial(SUBSCRIPTION, List.of("public.orders", "public.lines"))).isTrue();
            assertThat(store.list(SUBSCRIPTION)).filteredOn(b -> Backfill.INITIAL.equals(b.origin())).singleElement()
                    .satisfies(initial -> assertThat(initial.tables()).containsExactly("public.lines"));
            assertThat(store.insertInitial(SUBSCRIPTION, List.of("public.lines"))).as("once ever").isFalse();
        }
    }

    /**
     * Rows moved out of a backfill's reach are kept once each (an update the stream sends again after
     * a restart is saved again), across a pause, forgotten one by one as they are read, and all with
     * the backfill's end: a paused backfill cancelled after a restart never loaded them to forget them.
     * One saved for a backfill gone meanwhile is let go, not a failure of every later save.
     */
    @Test
    void rowsMovedAreKeptOnceUntilReadOrUntilTheirBackfillEnds() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "backfill_moved_store")) {
            BackfillStore store = new BackfillStore(source.dataSource, "walhook");
            UUID id = store.insertUnlessBusy(SUBSCRIPTION, Backfill.API, List.of("public.orders"), null, 100, null)
                    .backfill().id();
            Watermarks.Moved first = new Watermarks.Moved(id, "public.orders", List.of("7", "a,b"), io.walhook.pgoutput.Lsn.of(0x2000));
            Watermarks.Moved second = new Watermarks.Moved(id, "public.orders", List.of("8", "c"), io.walhook.pgoutput.Lsn.of(0x3000));
            Watermarks.Moved ofNoBackfill = new Watermarks.Moved(UUID.randomUUID(), "public.orders", List.of("9"),
                    io.walhook.pgoutput.Lsn.of(0x3000));
            store.saveMoved(List.of(first, second, ofNoBackfill));
            store.saveMoved(List.of(first));
            assertThat(store.moved(id, 10)).containsExactly(first, second);
            assertThat(store.moved(id, 1)).containsExactly(first);
            assertThat(store.movedTables(id)).containsExactly("public.orders");
            assertThat(store.transition(id, List.of(Backfill.State.RUNNING), Backfill.State.PAUSED, null)).isTrue();
            assertThat(store.moved(id, 10)).as("kept across a pause").containsExactly(first, second);
            store.forgetMoved(List.of(first));
            assertThat(store.moved(id, 10)).containsExactly(second);
            assertThat(store.transition(id, List.of(Backfill.State.PAUSED), Backfill.State.CANCELLED, null)).isTrue();
            assertThat(store.moved(id, 10)).as("gone with the backfill's end").isEmpty();
        }
    }

    /**
     * Each backfill has a key of its own for its read events' ids, random (two backfills, two keys)
     * and kept (read again, the same); a backfill an older walhook inserted has none, and keeps its
     * ids, rather than one the column's default gave it, which the older walhook running it ignored.
     */
    @Test
    void eachBackfillHasARandomKeyOfItsOwnForItsIds() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "backfill_key")) {
            BackfillStore store = new BackfillStore(source.dataSource, "walhook");
            Backfill first = store.insertUnlessBusy(SUBSCRIPTION, Backfill.API, List.of("public.orders"), null, 100, null)
                    .backfill();
            assertThat(store.insertInitial("config:other", List.of("public.lines"))).isTrue();
            Backfill second = store.list("config:other").get(0);
            byte[] key = store.idKey(first.id());
            assertThat(key).hasSize(32);
            assertThat(store.idKey(first.id())).isEqualTo(key);
            assertThat(store.idKey(second.id())).hasSize(32).isNotEqualTo(key);
            assertThat(store.idKey(UUID.randomUUID())).isNull();
            // inserted by a walhook from before keys (a rolling upgrade): none, whichever walhook runs it
            UUID older = UUID.randomUUID();
            source.sql("INSERT INTO walhook.backfill (id, subscription_id, state, tables, chunk_size) VALUES ('" + older
                    + "', 'config:older', 'running', '{public.orders}', 100)");
            assertThat(store.idKey(older)).isNull();
        }
    }
}
