package io.walhook.api;

import java.util.List;

import com.fasterxml.jackson.annotation.JsonInclude;

import io.quarkus.runtime.annotations.RegisterForReflection;

/**
 * The body of {@code GET /status}; see {@code StatusView} in openapi.yaml. {@code role}: active
 * (streams the slot), standby (waits for the active instance's lock) or starting. Unknown values
 * are written as null, never left out: a client reads the same fields whatever the state.
 */
@RegisterForReflection
@JsonInclude(JsonInclude.Include.ALWAYS)
public record StatusView(String role, SlotView slot, String serverLsn, Long lagBytes, String checkpointLsn,
        ReplicationView replication, List<SubscriptionStatusView> subscriptions) {

    /** The replication reader of this instance. */
    @RegisterForReflection
    @JsonInclude(JsonInclude.Include.ALWAYS)
    public record ReplicationView(String state, String lastError, String receivedLsn, String acknowledgedLsn,
            long events, int pendingTransactions, int openStreams, long spilledTransactions) {
    }

    /** The replication slot as the server reports it; {@code exists=false} before walhook created it. */
    @RegisterForReflection
    @JsonInclude(JsonInclude.Include.ALWAYS)
    public record SlotView(String name, boolean exists, Boolean active, String confirmedFlushLsn, String restartLsn,
            String walStatus) {
    }

    /** Per-subscription delivery counters; {@code disabled}: a 410 Gone stopped its delivery until a replay. */
    @RegisterForReflection
    @JsonInclude(JsonInclude.Include.ALWAYS)
    public record SubscriptionStatusView(String name, long inFlight, long retrying, long parked, long delivered,
            String lastError, boolean disabled) {
    }
}
