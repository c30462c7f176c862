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
