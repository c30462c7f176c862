package io.walhook.api;

import java.util.List;

import io.quarkus.runtime.annotations.RegisterForReflection;

/**
 * The body of {@code GET /status}; see {@code StatusView} in openapi.yaml. {@code role}: active
 * (streams the slot), standby (waits for the active instance's lock) or starting.
 */
@RegisterForReflection
public record StatusView(String role, SlotView slot, String serverLsn, Long lagBytes, String checkpointLsn,
        ReplicationView replication, List<SubscriptionStatusView> subscriptions) {

    /** The replication reader of this instance. */
    @RegisterForReflection
    public record ReplicationView(String state, String lastError, String receivedLsn, String acknowledgedLsn,
            long events, int pendingTransactions, int openStreams, long spilledTransactions) {
    }

    /** The replication slot as the server reports it; {@code exists=false} before walhook created it. */
    @RegisterForReflection
    public record SlotView(String name, boolean exists, Boolean active, String confirmedFlushLsn, String restartLsn,
            String walStatus) {
    }

    /** Per-subscription delivery counters. */
    @RegisterForReflection
    public record SubscriptionStatusView(String name, long inFlight, long retrying, long parked, long delivered,
            String lastError) {
    }
}
