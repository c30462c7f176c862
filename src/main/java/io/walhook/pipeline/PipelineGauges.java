package io.walhook.pipeline;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.walhook.delivery.Dispatcher;
import io.walhook.source.SourceStatus;

/**
 * The pipeline's own meters, read from the source's status and delivery's when scraped: whether
 * the stream runs, whether its slot is gone, transactions pending, events in memory and in the
 * durable queues, events handed to delivery, transactions spilled to disk (docs/operations.md).
 */
final class PipelineGauges {

    private PipelineGauges() {
    }

    /** Registers them; the meters, for their removal when walhook stops. */
    static java.util.List<io.micrometer.core.instrument.Meter> register(MeterRegistry metrics, ReplicationSource source) {
        java.util.List<io.micrometer.core.instrument.Meter> meters = new java.util.ArrayList<>();
        meters.add(Gauge.builder("walhook.replication.streaming", source, s -> is(s, SourceStatus.State.STREAMING))
                .description("1 while the replication stream runs").register(metrics));
        meters.add(Gauge.builder("walhook.replication.slot.invalid", source, s -> is(s, SourceStatus.State.SLOT_INVALID))
                .description("1 when the slot is gone or invalidated: changes were lost to it").register(metrics));
        meters.add(Gauge.builder("walhook.replication.publication.missing", source, s -> s.publicationProblem() != null ? 1 : 0)
                .description("1 while the publication is missing: the changes committed meanwhile are lost").register(metrics));
        meters.add(FunctionCounter.builder("walhook.replication.publication.drops", source, ReplicationSource::publicationDrops)
                .description("times the publication was found missing, or dropped and created again: changes were lost")
                .register(metrics));
        meters.add(Gauge.builder("walhook.replication.pending.transactions", source, s -> value(s, SourceStatus::pendingTransactions))
                .description("transactions read but not yet fully delivered").register(metrics));
        meters.add(Gauge.builder("walhook.delivery.in.flight", source,
                s -> s.deliveries().stream().mapToLong(Dispatcher.DeliveryStatus::queued).sum())
                .description("events in memory not yet delivered or durably queued, all subscriptions").register(metrics));
        meters.add(Gauge.builder("walhook.delivery.memory", source, ReplicationSource::deliveryMemoryBytes).baseUnit("bytes")
                .description("bytes of undelivered events in memory, all subscriptions: routed (at most"
                        + " WALHOOK_DELIVERY_MEMORY_BYTES after each routed chunk) and read back from durable queues (a quarter"
                        + " of that)").register(metrics));
        meters.add(Gauge.builder("walhook.delivery.parked.current", source,
                s -> s.deliveries().stream().mapToLong(Dispatcher.DeliveryStatus::durableBacklog).sum())
                .description("events in the durable queues now, all subscriptions").register(metrics));
        meters.add(FunctionCounter.builder("walhook.replication.events", source, s -> value(s, SourceStatus::events))
                .description("events handed to delivery").register(metrics));
        meters.add(FunctionCounter.builder("walhook.replication.spilled.transactions", source,
                s -> value(s, SourceStatus::spilledTransactions))
                .description("streamed transactions that outgrew memory and went to disk").register(metrics));
        return meters;
    }

    private static double is(ReplicationSource source, SourceStatus.State state) {
        SourceStatus status = source.status();
        return status != null && status.state() == state ? 1 : 0;
    }

    private static double value(ReplicationSource source, java.util.function.ToDoubleFunction<SourceStatus> metric) {
        SourceStatus status = source.status();
        return status == null ? 0 : metric.applyAsDouble(status);
    }
}
