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

    /**
     * Per-subscription delivery: {@code mode} direct or durable (its events go through its durable
     * queue), counts of events in memory, under way, held back behind their row's failing change,
     * and in the durable queue ({@code parked}); {@code disabled}: a 410 Gone stopped its delivery
     * until a replay; {@code backfills}: those this instance runs for it now.
     */
    @RegisterForReflection
    @JsonInclude(JsonInclude.Include.ALWAYS)
    public record SubscriptionStatusView(String id, String name, String mode, long queued, long inFlight, long retrying,
            long heldBack, long parked, String oldestParkedCommit, double drainRate, long delivered, String lastError,
            boolean disabled, boolean paused, List<BackfillStatusView> backfills, long filterErrors,
            String filterLastError) {
    }

    /** A backfill running on this instance: its id and the rows it has sent so far. */
    @RegisterForReflection
    @JsonInclude(JsonInclude.Include.ALWAYS)
    public record BackfillStatusView(String id, long rowsSent) {
    }
}
