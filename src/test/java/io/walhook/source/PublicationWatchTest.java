package io.walhook.source;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

import io.walhook.testing.TestPostgres;

/**
 * A publication dropped while walhook streams loses the changes committed while it is missing
 * (PostgreSQL 18 sends none of them and only warns in its own log): walhook looks, and says so.
 */
class PublicationWatchTest {

    @Test
    void aPublicationDroppedIsMissingUntilCreatedAgainAndADropBetweenTwoLooksIsCounted() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "publication_watch")) {
            source.sql("CREATE TABLE orders (id int PRIMARY KEY)");
            SourceDatabase database = new SourceDatabase(source.dataSource);
            assertThat(database.ensurePublication("walhook", "public.orders")).as("created").isTrue();
            assertThat(database.ensurePublication("walhook", "public.orders")).as("there already").isFalse();
            PublicationWatch watch = new PublicationWatch(database, "walhook");
            watch.starting(false);
            watch.look();
            assertThat(watch.problem()).isNull();
            assertThat(watch.dropped()).isZero();

            source.sql("DROP PUBLICATION walhook");
            watch.look();
            assertThat(watch.problem()).startsWith("publication walhook does not exist: it was dropped while walhook streams")
                    .contains("PostgreSQL 18 sends none of them");
            watch.look();
            assertThat(watch.dropped()).as("one drop, however often it is seen").isOne();

            source.sql("CREATE PUBLICATION walhook FOR TABLE orders");
            watch.look();
            assertThat(watch.problem()).isNull();
            assertThat(watch.dropped()).isOne();

            // dropped and created again between two looks: never seen missing, but its changes meanwhile are lost too
            source.sql("DROP PUBLICATION walhook", "CREATE PUBLICATION walhook FOR TABLE orders");
            watch.look();
            assertThat(watch.problem()).isNull();
            assertThat(watch.dropped()).isEqualTo(2);
            watch.look();
            assertThat(watch.dropped()).as("the new one is the one looked for now").isEqualTo(2);
        }
    }

    @Test
    void aPublicationMissingAsTheStreamStartsIsMissing() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "publication_missing")) {
            PublicationWatch watch = new PublicationWatch(new SourceDatabase(source.dataSource), "walhook");
            watch.starting(false); // dropped between walhook making sure of it and the stream starting
            assertThat(watch.problem()).startsWith("publication walhook does not exist");
            assertThat(watch.dropped()).isOne();
            source.sql("CREATE PUBLICATION walhook FOR ALL TABLES");
            watch.look();
            assertThat(watch.problem()).isNull();
            assertThat(watch.dropped()).as("there again, not dropped again").isOne();
        }
    }

    @Test
    void aPublicationCreatedAtStartForASlotStreamedFromBeforeCountsAsDropped() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "publication_gone")) {
            PublicationWatch watch = new PublicationWatch(new SourceDatabase(source.dataSource), "walhook");
            source.sql("CREATE PUBLICATION walhook FOR ALL TABLES");
            watch.starting(true);
            assertThat(watch.dropped()).isOne();
            assertThat(watch.problem()).as("there now: ready").isNull();
        }
    }
}
