package io.walhook.source;

import java.nio.file.Path;
import java.sql.SQLException;
import java.time.Duration;

import jakarta.annotation.Priority;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;
import jakarta.inject.Singleton;

import org.jboss.logging.Logger;

import io.agroal.api.AgroalDataSource;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.runtime.PreventFurtherStepsException;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import io.walhook.checkpoint.CheckpointStore;
import io.walhook.config.SourceUrl;
import io.walhook.config.StartupCheck;
import io.walhook.config.WalhookConfig;

/**
 * Starts the replication reader once the configuration is valid: checks the server, creates the
 * publication and slot when missing, resumes from the persisted checkpoint. Until routing and
 * delivery exist, no subscription can match, so every event is complete as soon as it is taken.
 */
@Singleton
public class ReplicationSource {

    private static final Logger LOG = Logger.getLogger(ReplicationSource.class);

    private final WalhookConfig config;
    private final AgroalDataSource dataSource;
    private volatile ReplicationReader reader;
    private volatile Thread drain;

    @Inject
    public ReplicationSource(WalhookConfig config, AgroalDataSource dataSource, MeterRegistry metrics) {
        this.config = config;
        this.dataSource = dataSource;
        Gauge.builder("walhook.replication.streaming", this, s -> s.is(SourceStatus.State.STREAMING))
                .description("1 while the replication stream runs").register(metrics);
        Gauge.builder("walhook.replication.slot.invalid", this, s -> s.is(SourceStatus.State.SLOT_INVALID))
                .description("1 when the slot is gone or invalidated: changes were lost to it").register(metrics);
        Gauge.builder("walhook.replication.pending.transactions", this, s -> s.value(SourceStatus::pendingTransactions))
                .description("transactions read but not yet fully delivered").register(metrics);
        FunctionCounter.builder("walhook.replication.events", this, s -> s.value(SourceStatus::events))
                .description("events handed to delivery").register(metrics);
        FunctionCounter.builder("walhook.replication.spilled.transactions", this,
                s -> s.value(SourceStatus::spilledTransactions))
                .description("streamed transactions that outgrew memory and went to disk").register(metrics);
    }

    private double is(SourceStatus.State state) {
        SourceStatus status = status();
        return status != null && status.state() == state ? 1 : 0;
    }

    private double value(java.util.function.ToDoubleFunction<SourceStatus> metric) {
        SourceStatus status = status();
        return status == null ? 0 : metric.applyAsDouble(status);
    }

    void onStart(@Observes @Priority(20) StartupEvent event) {
        SourceUrl source = StartupCheck.validate(config);
        SourceDatabase database = new SourceDatabase(dataSource);
        CheckpointStore checkpoints = new CheckpointStore(dataSource, config.stateSchema());
        try {
            database.checkPrerequisites();
            database.ensurePublication(config.publication().name(), config.publication().tables());
            database.ensureSlot(config.slot(), checkpoints.load(config.slot()));
            WalhookConfig.Source s = config.source();
            ReplicationReader.Settings settings = new ReplicationReader.Settings(source.jdbcUrl(), source.user(),
                    source.password(), config.slot(), config.publication().name(), config.stateSchema(),
                    database.serverMajor(), s.statusInterval(), s.checkpointInterval(), s.reconnectMaxBackoff(),
                    s.handoffCapacity(), Path.of(s.spillDirectory().orElse(System.getProperty("java.io.tmpdir"))),
                    s.streamMemoryBytes());
            reader = ReplicationReader.resuming(settings, checkpoints);
        } catch (SourceSetupException e) {
            throw stop(e.getMessage());
        } catch (SQLException e) {
            throw stop("cannot prepare replication on " + source + ": " + e.getMessage());
        }
        reader.start();
        drain = new Thread(this::drainWithoutSubscriptions, "walhook-drain");
        drain.setDaemon(true);
        drain.start();
    }

    private static PreventFurtherStepsException stop(String problem) {
        LOG.error("walhook cannot start: " + SourceUrl.VARIABLE + " " + problem);
        Quarkus.asyncExit(StartupCheck.EXIT_CONFIG);
        return new PreventFurtherStepsException(problem, StartupCheck.EXIT_CONFIG);
    }

    /** No subscription exists yet, so an event awaits no delivery: it is complete once taken. */
    private void drainWithoutSubscriptions() {
        try {
            while (!Thread.currentThread().isInterrupted()) {
                PendingEvent pending = reader.events().take();
                reader.tracker().complete(pending.ticket(), 1);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    void onStop(@Observes ShutdownEvent event) throws InterruptedException {
        if (reader != null) {
            reader.stop(Duration.ofSeconds(10));
        }
        if (drain != null) {
            drain.interrupt();
        }
    }

    /** Null before start-up finished. */
    public SourceStatus status() {
        ReplicationReader r = reader;
        return r == null ? null : r.status();
    }
}
