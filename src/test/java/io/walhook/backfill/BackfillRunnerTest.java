package io.walhook.backfill;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.UUID;

import org.junit.jupiter.api.Test;

/** The parts of the runner that need no database: read event ids and a snapshot's in-progress xids. */
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
    void aSnapshotsInProgressXidsAreReadAs32BitXids() {
        assertThat(BackfillRunner.inProgress("100:100:")).isEmpty();
        assertThat(BackfillRunner.inProgress("100:105:100,103")).containsExactlyInAnyOrder(100L, 103L);
        // an xid8 of epoch 1: the stream carries its lower 32 bits
        assertThat(BackfillRunner.inProgress("4294967396:4294967400:4294967397")).containsExactly(101L);
    }
}
