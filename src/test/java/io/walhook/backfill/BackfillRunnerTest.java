package io.walhook.backfill;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.UUID;

import org.junit.jupiter.api.Test;

/**
 * The parts of the runner that need no database: read event ids, a snapshot's in-progress xids, and
 * when an idle round ends.
 */
class BackfillRunnerTest {

    private static final UUID BACKFILL = UUID.fromString("5f0c2a8e-1111-4222-8333-944455556666");

    @Test
    void aRowsIdIsItsBackfillAnd128BitsOfItsTableAndKeyTheSameEveryTime() {
        String id = BackfillRunner.eventId(BACKFILL, "public.orders", "42");
        assertThat(id).matches(BACKFILL + "-[0-9a-f]{32}");
        assertThat(BackfillRunner.eventId(BACKFILL, "public.orders", "42")).isEqualTo(id);
        assertThat(BackfillRunner.eventId(BACKFILL, "public.orders", "43")).isNotEqualTo(id);
        assertThat(BackfillRunner.eventId(BACKFILL, "public.order", "s42")).as("table and key kept apart")
                .isNotEqualTo(id);
        assertThat(BackfillRunner.eventId(UUID.randomUUID(), "public.orders", "42")).doesNotStartWith(BACKFILL.toString());
        assertThat(BackfillRunner.eventId(BACKFILL, "public.accounts", "acme\0" + "7"))
                .isNotEqualTo(BackfillRunner.eventId(BACKFILL, "public.accounts", "acme7"));
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

    @Test
    void aSnapshotsInProgressXidsAreReadAs32BitXids() {
        assertThat(BackfillRunner.inProgress("100:100:")).isEmpty();
        assertThat(BackfillRunner.inProgress("100:105:100,103")).containsExactlyInAnyOrder(100L, 103L);
        // an xid8 of epoch 1: the stream carries its lower 32 bits
        assertThat(BackfillRunner.inProgress("4294967396:4294967400:4294967397")).containsExactly(101L);
    }

    @Test
    void rowsAreFetchedOneAtATimeUntilTheirSizeIsKnownThenAsManyAsAQuarterOfAChunksBytesHold() {
        assertThat(BackfillRunner.fetchSize(0)).isEqualTo(1);
        assertThat(BackfillRunner.fetchSize(200)).isEqualTo(BackfillRunner.MAX_FETCH);
        assertThat(BackfillRunner.fetchSize(20_000)).isEqualTo((int) (BackfillRunner.CHUNK_BYTES / 4 / 20_000));
        assertThat(BackfillRunner.fetchSize(10L << 20)).isEqualTo(1);
    }

    @Test
    void itsSettingsNeverShowThePassword() {
        BackfillRunner.Settings settings = new BackfillRunner.Settings("jdbc:postgresql://db:5432/orders", "app",
                "Zq9-pa55", "walhook", "walhook", java.time.Duration.ofMillis(500), java.time.Duration.ofSeconds(30));
        assertThat(settings.toString()).contains("db:5432").doesNotContain("Zq9-pa55");
    }
}
