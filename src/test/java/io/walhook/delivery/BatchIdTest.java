package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.walhook.pgoutput.Lsn;
import io.walhook.testing.WebhookReceiver;

/**
 * A batch's {@code webhook-id} is made from every event in it: named by its first event and its
 * count, two batches cut differently ({@code [e1, e3, e4]} failed, then after a crash
 * {@code [e1, e2, e3]}) had one id, and a receiver skipping ids it had seen, as Standard Webhooks
 * advises, dropped {@code e2}.
 */
class BatchIdTest {

    private static List<Job> jobs(String... ids) {
        return java.util.Arrays.stream(ids).map(id -> new Job(id, Lsn.of(1), Instant.EPOCH, new byte[0], "application/json",
                Map.of(), null, Ordering.EVERYTHING)).toList();
    }

    @Test
    void batchesOfOtherEventsHaveOtherIdsAndTheSameEventsTheSameId() {
        String first = Lane.batchId(jobs("0000000001000000-0001", "0000000001000000-0003", "0000000001000000-0004"));
        String recut = Lane.batchId(jobs("0000000001000000-0001", "0000000001000000-0002", "0000000001000000-0003"));
        assertThat(recut).isNotEqualTo(first);
        assertThat(Lane.batchId(jobs("0000000001000000-0001", "0000000001000000-0003", "0000000001000000-0004")))
                .as("every attempt of the same events").isEqualTo(first);
        assertThat(first).as("as docs/events.md says").startsWith("0000000001000000-0001+3-")
                .isEqualTo(WebhookReceiver.batchId(List.of("0000000001000000-0001", "0000000001000000-0003",
                        "0000000001000000-0004")));
        assertThat(Lane.batchId(jobs("0000000001000000-0001"))).as("a batch of one").startsWith("0000000001000000-0001+1-");
    }
}
