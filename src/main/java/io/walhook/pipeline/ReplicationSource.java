package io.walhook.pipeline;

import java.nio.file.Path;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import jakarta.annotation.Priority;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.event.ObservesAsync;
import jakarta.inject.Inject;
import jakarta.inject.Singleton;

import org.eclipse.microprofile.config.ConfigProvider;
import org.jboss.logging.Logger;

import io.agroal.api.AgroalDataSource;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.runtime.PreventFurtherStepsException;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import io.quarkus.vertx.http.DomainSocketServerStart;
import io.quarkus.vertx.http.HttpServerStart;
import io.quarkus.vertx.http.HttpsServerStart;
import io.walhook.checkpoint.CheckpointStore;
import io.walhook.config.AmqpUrl;
import io.walhook.config.ConfigException;
import io.walhook.config.SourceUrl;
import io.walhook.config.StartupCheck;
import io.walhook.config.WalhookConfig;
import io.walhook.delivery.AmqpClient;
import io.walhook.delivery.Dispatcher;
import io.walhook.delivery.ParkedEventStore;
import io.walhook.delivery.RoutingLoop;
import io.walhook.delivery.Transport;
import io.walhook.delivery.WebhookTransport;
import io.walhook.routing.Destination;
import io.walhook.routing.EventEncoder;
import io.walhook.routing.Subscription;
import io.walhook.routing.SubscriptionConfigReader;
import io.walhook.routing.SubscriptionRegistry;
import io.walhook.routing.SubscriptionStore;
import io.walhook.routing.TablePattern;
import io.walhook.source.ActiveLock;
import io.walhook.source.ReplicationReader;
import io.walhook.source.SourceDatabase;
import io.walhook.source.SourceSetupException;
import io.walhook.source.SourceStatus;
import io.walhook.source.SubscriptionChanges;

/**
 * Starts the pipeline once the configuration is valid: checks the server, creates the publication
 * and slot when missing, resumes the reader from the persisted checkpoint, and routes its events to
 * the subscriptions in force (configured ones, and the API's, reloaded as they change).
 */
@Singleton
public class ReplicationSource {

    private static final Logger LOG = Logger.getLogger(ReplicationSource.class);

    private final WalhookConfig config;
    private final AgroalDataSource dataSource;
    private final MeterRegistry metrics;
    /** The pipeline's gauges, read from this instance: removed when it stops, for the next one to register its own. */
    private final List<io.micrometer.core.instrument.Meter> gauges;
    private volatile ReplicationReader reader;
    private volatile Thread drain;
    private volatile SubscriptionPoller poller;
    private volatile SubscriptionRegistry registry;
    private volatile Dispatcher sender;
    /** Another instance took the lock: this one delivers nothing more, and stops without draining. */
    private volatile boolean lockLost;
    /** Other deployments' state schemas the stream met ({@link #stateTable}). */
    private final java.util.Set<String> foreignStateSchemas = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private volatile AmqpClient broker;
    private volatile ActiveLock lock;
    /** Renews the lock's lease ({@link #keepLease}). */
    private volatile Thread leaseKeeper;
    /** How often the lease keeper looks at the lock's session: well within {@link ActiveLock#LEASE}. */
    private static final long LEASE_LOOK_MILLIS = 1000;
    private volatile Thread standby;
    private volatile io.walhook.backfill.Backfills backfills;
    private volatile io.walhook.backfill.BackfillRunner backfillRunner;
    private volatile Thread backfillThread;
    private List<String> initialBackfills = List.of();
    private volatile Role role = Role.STARTING;
    private volatile boolean stopping;
    private volatile String routingFailure;
    /** Start-up steps against the database, tried again while it restarts. */
    private final StartupPatience patience = new StartupPatience();
    /** Whether the publication is still the one the stream started with: looked at by the poller while active. */
    private final io.walhook.source.PublicationWatch publication;
    /** Completes when the first HTTP server listens; the pipeline starts then (see onListening). */
    private final CompletableFuture<Void> listening = new CompletableFuture<>();
    private final io.vertx.core.Vertx vertx;
    /** Every webhook's HTTP client, delivery's and the API test-fire's (it connects on first use). */
    private final io.walhook.delivery.WebhookClient webhookClient;

    @Inject
    public ReplicationSource(WalhookConfig config, AgroalDataSource dataSource, MeterRegistry metrics,
            io.vertx.core.Vertx vertx) {
        this.vertx = vertx;
        this.webhookClient = new io.walhook.delivery.WebhookClient(vertx);
        this.config = config;
        this.dataSource = dataSource;
        this.metrics = metrics;
        this.publication = new io.walhook.source.PublicationWatch(new SourceDatabase(dataSource), config.publication().name());
        this.gauges = PipelineGauges.register(metrics, this);
    }

    void onStart(@Observes @Priority(20) StartupEvent event) {
        SourceUrl source = StartupCheck.validate(config);
        if (!ConfigProvider.getConfig().getOptionalValue("quarkus.http.host-enabled", Boolean.class).orElse(true)) {
            listening.complete(null); // no plain HTTP server to wait for
        }
        List<Subscription> configured;
        Map<String, String> extensions;
        try {
            configured = SubscriptionConfigReader.read(config, System.getenv());
            extensions = SubscriptionConfigReader.cloudEventsOverrides(System.getenv("K_CE_OVERRIDES"));
            initialBackfills = SubscriptionConfigReader.initialBackfills(config);
        } catch (ConfigException problem) {
            throw StartupCheck.stop(problem);
        }
        SourceDatabase database = new SourceDatabase(dataSource);
        try {
            patiently(() -> {
                database.checkPrerequisites();
                return null;
            });
        } catch (SourceSetupException e) {
            throw stop(e.variable(), e.getMessage());
        } catch (SQLException e) {
            throw stop("cannot check " + source + ": " + e.getMessage());
        }
        registry = new SubscriptionRegistry(configured, new SubscriptionStore(dataSource, config.stateSchema()));
        backfills = new io.walhook.backfill.Backfills(dataSource, config.stateSchema(), config.publication().name());
        try {
            patiently(registry::refresh);
        } catch (SourceSetupException | SQLException e) {
            throw stop("cannot read subscriptions from " + config.stateSchema() + ".subscription: " + e.getMessage());
        }
        // standbys connect too (lazily, on first use): the API's test-fire works on every instance
        broker = config.amqpUrl().filter(url -> !url.isBlank())
                .map(url -> new AmqpClient(vertx, AmqpUrl.parse(url), config.delivery().requestTimeout())).orElse(null);
        lock = new ActiveLock(source.jdbcUrl(), source.user(), source.password(), config.slot(), config.stateSchema());
        boolean active;
        try {
            active = patiently(lock::tryAcquire);
        } catch (SourceSetupException | SQLException e) {
            throw stop("cannot take the lock of slot " + config.slot() + " on " + source + ": " + e.getMessage());
        }
        lock.onRenewed(() -> {
            Dispatcher delivering = sender;
            if (delivering != null) {
                delivering.leaseRenewed();
            }
        });
        poller = new SubscriptionPoller(source, registry, () -> sender, lock, publication, config.slot(),
                () -> role == Role.ACTIVE, () -> role == Role.ACTIVE && !stopping, () -> {
                    io.walhook.backfill.BackfillRunner running = backfillRunner;
                    if (running != null) {
                        running.wake();
                    }
                }, this::lockLost, why -> {
                    ReplicationReader streaming = reader;
                    if (streaming != null) {
                        streaming.letGo(why);
                    }
                });
        poller.start();
        leaseKeeper = new Thread(this::keepLease, "walhook-lease");
        leaseKeeper.setDaemon(true);
        leaseKeeper.start();
        if (active) {
            try {
                activate(source, database, extensions);
            } catch (SourceSetupException e) {
                throw stopWatching(stop(e.variable(), e.getMessage()));
            } catch (SQLException e) {
                throw stopWatching(stop("cannot prepare replication on " + source + ": " + e.getMessage()));
            } catch (RuntimeException | Error e) {
                stopWatching(null);
                throw e;
            }
            return;
        }
        role = Role.STANDBY;
        LOG.infof("another walhook is active on slot %s: standing by, trying its lock every %s", config.slot(),
                config.standbyPollInterval());
        standby = new Thread(() -> standBy(source, database, extensions), "walhook-standby");
        standby.setDaemon(true);
        standby.start();
    }

    /**
     * Renews the slot lock's lease every second while this instance holds the lock, on a thread of
     * its own: a slow reload of subscriptions on the poller's thread does not let it run out, and
     * stop every request. The poller's look takes the lock again or gives it up; this one only
     * finds the session alive (or not: then nothing is sent until the poller took it again).
     */
    private void keepLease() {
        while (true) {
            try {
                Thread.sleep(LEASE_LOOK_MILLIS);
            } catch (InterruptedException e) {
                return;
            }
            if (!lockLost) {
                try {
                    lock.stillHeld(); // false at once while not held (a standby)
                } catch (RuntimeException e) {
                    LOG.debugf("renewing the lease: %s", e.getMessage()); // the poller's look takes the lock again
                }
            }
        }
    }

    /**
     * A thread walhook cannot go on without ended on an unexpected error: walhook stops (exit 1).
     * Staying up, it would hold the slot's lock with nothing reading or routing behind it, and no
     * other instance would take over; restarted, it resumes from the checkpoint.
     */
    private void fatal(String what, Throwable e) {
        LOG.errorf(e, "%s ended unexpectedly (%s): walhook stops, and a restart resumes from the checkpoint", what, e);
        Quarkus.asyncExit(1); // a graceful stop: what is under way finishes and is acknowledged, and the lock is let go
    }

    /** Runs a start-up step again while the database restarts ({@link StartupPatience}). */
    private <T> T patiently(StartupPatience.Step<T> step) throws SQLException, SourceSetupException {
        return patience.run(step);
    }

    /** Waits for the active instance's lock; takes over from the persisted checkpoint when it is free. */
    private void standBy(SourceUrl source, SourceDatabase database, Map<String, String> extensions) {
        String lastProblem = null;
        while (!stopping) {
            boolean takingOver = false;
            try {
                Thread.sleep(config.standbyPollInterval().toMillis());
                if (lock.tryAcquire()) {
                    LOG.infof("slot %s is free: this instance takes over from the persisted checkpoint", config.slot());
                    takingOver = true;
                    activate(source, database, extensions);
                    return;
                }
            } catch (InterruptedException e) {
                return;
            } catch (SourceSetupException e) {
                LOG.error("walhook cannot take over: " + e.variable() + " " + e.getMessage());
                Quarkus.asyncExit(StartupCheck.EXIT_CONFIG);
                return;
            } catch (RuntimeException | Error e) {
                // it holds the lock now: standing by on, it would keep every instance from taking over
                fatal("taking over slot " + config.slot(), e);
                return;
            } catch (SQLException e) {
                if (takingOver) { // whether or not it still holds the lock: its session may have ended meanwhile
                    // the take-over failed part-way (past the start-up patience): tried again from here it held the lock
                    // for good while it said it stood by, and no other instance could take over. Delivery it started
                    // stops first; the lock goes as after a crash (the next holder waits out this one's lease)
                    Dispatcher made = sender;
                    if (made != null) {
                        made.close();
                        sender = null;
                    }
                    lock.abandon();
                    LOG.warnf("taking over slot %s failed (%s): let the lock go, for another instance or a later try",
                            config.slot(), e.getMessage());
                    lastProblem = String.valueOf(e.getMessage());
                } else if (!String.valueOf(e.getMessage()).equals(lastProblem)) {
                    LOG.warnf("standing by on slot %s: %s", config.slot(), e.getMessage());
                    lastProblem = String.valueOf(e.getMessage());
                }
            }
        }
    }

    /** This instance holds the slot's lock: prepares the slot, resumes from the checkpoint, and starts the pipeline. */
    private void activate(SourceUrl source, SourceDatabase database, Map<String, String> extensions)
            throws SQLException, SourceSetupException {
        CheckpointStore checkpoints = new CheckpointStore(dataSource, config.stateSchema());
        WalhookConfig.Source stream = config.source();
        WalhookConfig.Delivery delivery = config.delivery();
        ParkedEventStore queues = new ParkedEventStore(dataSource, config.stateSchema(), lock::fence); // an instance that lost the lock writes nothing
        // the subscriptions as they are now: a standby taking over knew them as its poller last read them, up to 30 s
        // before when a write's notification was lost (the blip that ended the active instance's lock session), and
        // the changes it routed with those meanwhile were acknowledged without the subscriptions written since
        patiently(registry::refresh);
        // every step against the database before anything starts: each can be tried again
        // dead letters dropped whose changes the stream may send again: read before the checkpoint is, so that one an
        // instance stopping late saves after it cannot have let go of any the stream then sends again
        ParkedEventStore.DroppedEvents dropped = patiently(queues::dropped);
        boolean[] created = new boolean[1]; // by any attempt: one failing after it would find it there
        boolean[] streamedBefore = new boolean[1];
        ReplicationReader resumed = patiently(() -> {
            created[0] |= database.ensurePublication(config.publication().name(), config.publication().tables());
            java.util.Optional<io.walhook.pgoutput.Lsn> checkpoint = checkpoints.load(config.slot());
            streamedBefore[0] = checkpoint.isPresent();
            database.ensureSlot(config.slot(), checkpoint);
            ReplicationReader.Settings settings = new ReplicationReader.Settings(source.jdbcUrl(), source.user(),
                    source.password(), config.slot(), config.publication().name(), config.stateSchema(),
                    database.serverMajor(), stream.statusInterval(), stream.checkpointInterval(),
                    stream.reconnectMaxBackoff(), stream.handoffCapacity(), stream.handoffBytes(),
                    Path.of(stream.spillDirectory().orElse(System.getProperty("java.io.tmpdir"))), stream.streamMemoryBytes(),
                    this::stateTable, this::primaryKey);
            return ReplicationReader.resuming(settings, checkpoints);
        });
        // created for a slot walhook streamed from before: dropped while it was away
        patiently(() -> {
            publication.starting(created[0] && streamedBefore[0]);
            return null;
        });
        try {
            TablePattern.unmatched(registry.router().subscriptions(), database.publishedTables(config.publication().name()))
                    .forEach(LOG::warn);
        } catch (SQLException e) {
            LOG.debugf("the subscriptions' table patterns were not checked: %s", e.getMessage()); // only a warning lost
        }
        MicrometerDeliveryMetrics deliveryMetrics = new MicrometerDeliveryMetrics(metrics);
        Dispatcher before = sender;
        if (before != null) {
            // a take-over that failed part-way, tried again: its lanes may have started on the durable queues, and
            // two lanes of one queue would each deliver it (a retry of one after the other's newer change, too)
            before.close();
        }
        // nothing the stream sends again committed before its checkpoint: queued changes older than it precede every resend.
        // After a failover to a server behind the old one, the queue's changes are of another history: none is taken
        // for a newer change of its row than what the stream sends now (unsigned, no position is past -1), and the
        // dropped ones' ids may be the new history's
        boolean otherHistory = resumed.otherHistory();
        if (otherHistory) {
            dropped = new ParkedEventStore.DroppedEvents(java.util.Set.of(), -1); // forgotten with the checkpoint replaced
        }
        queues.resumesFrom(otherHistory ? -1L : resumed.resumesFrom().isValid() ? resumed.resumesFrom().value() : 0);
        queues.earlierHistoryUpTo(resumed.earlierHistoryUpTo());
        sender = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(delivery.requestTimeout(), delivery.maxBackoff(),
                delivery.retryWindow(), delivery.parkedRetryInterval(), delivery.concurrency(), delivery.memoryBytes()),
                queues,
                deliveryMetrics, id -> registry.isPaused(id), this::transport,
                lock::sendableInNanos); // nothing starts while another instance may hold the lock, or be stopping
        Dispatcher dispatcher = sender;
        // after the dispatcher is there: a subscription the poller loads from now on reaches it by sync
        registry.router().subscriptions().forEach(deliveryMetrics::inForce);
        dispatcher.dropped(dropped); // before the stream sends any of them again
        // and those dropped meanwhile, whose notification found no dispatcher to tell
        patiently(() -> {
            dispatcher.dropped(queues.dropped(null));
            return null;
        });
        patiently(() -> {
            SubscriptionRegistry.InForce now = registry.inForce(); // read once: the two go together
            dispatcher.resumeParked(now.subscriptions(), now.held()); // lanes are created once: it can be tried again
            return null;
        });
        patiently(() -> {
            backfills.startInitial(registry.router().subscriptions(), initialBackfills); // once ever per subscription
            return null;
        });
        EventEncoder encoder = new EventEncoder("/walhook/" + source.database(), extensions);
        reader = resumed;
        io.walhook.backfill.Watermarks watermarks = new io.walhook.backfill.Watermarks();
        Thread routing = new Thread(new RoutingLoop(resumed.events(), resumed.tracker(), registry, encoder, sender,
                deliveryMetrics, watermarks), "walhook-routing");
        io.walhook.backfill.BackfillRunner runner = new io.walhook.backfill.BackfillRunner(
                new io.walhook.backfill.BackfillRunner.Settings(source.jdbcUrl(), source.user(), source.password(),
                        config.publication().name(), config.stateSchema(), config.backfill().chunkTarget(),
                        config.backfill().statementTimeout()),
                backfills.store(), watermarks, () -> registry.router().subscriptions(), id -> registry.held().contains(id),
                (subscription, rows) -> metrics.counter("walhook.backfill.rows", "subscription", subscription.name(),
                        "subscription_id", subscription.id()).increment(rows));
        // before the stream starts: a row moved in a table a backfill is reading is read again, even if the backfill is
        // paused, or the update that moved it is one sent again that the last run had not saved
        patiently(() -> {
            runner.watchTablesUnderWay();
            return null;
        });
        backfills.onChange(runner::wake);
        Thread backfilling = new Thread(runner, "walhook-backfill");
        backfilling.setDaemon(true);
        routing.setDaemon(true);
        routing.setUncaughtExceptionHandler((t, e) -> {
            routingFailure = String.valueOf(e.getMessage());
            fatal("routing", e);
        });
        resumed.onFailure((t, e) -> fatal("the replication reader", e));
        role = Role.ACTIVE;
        listening.thenRun(() -> {
            synchronized (this) { // not after onStop began
                if (!stopping) {
                    resumed.start();
                    routing.start();
                    drain = routing;
                    backfillRunner = runner;
                    backfillThread = backfilling;
                    backfilling.start();
                }
            }
        }).exceptionally(e -> {
            routingFailure = "the pipeline did not start: " + e.getMessage();
            LOG.error(routingFailure, e);
            return null;
        });
    }

    /*
     * Streaming starts once the HTTP server listens, not in the start-up observer: a backlog's
     * catch-up then does not compete with the rest of start-up for the CPU, health and /status
     * answer from its first event, and a start-up that fails late (the port taken) has read nothing
     * of the slot (parked events, out of the slot already, are retried from start-up on). Quarkus
     * fires these asynchronously when each server listens.
     */
    void onListening(@ObservesAsync HttpServerStart event) {
        listening.complete(null);
    }

    void onListening(@ObservesAsync HttpsServerStart event) {
        listening.complete(null);
    }

    void onListening(@ObservesAsync DomainSocketServerStart event) {
        listening.complete(null);
    }

    /**
     * The subscription's transport, as delivery uses it (also the API's test-fire). A webhook
     * created through the API checks every address it connects to, unless private destinations
     * are allowed; configured ones are the operator's own.
     */
    public Transport transport(Subscription subscription) {
        if (subscription.destination() instanceof Destination.Webhook webhook) {
            return new WebhookTransport(webhooks(), webhook, Clock.systemUTC(), config.delivery().requestTimeout(),
                    !subscription.readOnly() && !config.allowPrivateDestinations());
        }
        Destination.Amqp amqp = (Destination.Amqp) subscription.destination();
        if (broker == null) {
            return request -> java.util.concurrent.CompletableFuture.completedFuture(
                    Transport.Attempt.retry(AmqpUrl.VARIABLE + " is not set: no broker for " + amqp));
        }
        return broker.transport(amqp);
    }

    /**
     * Rows of the subscription's durable queue were dropped through this instance's API: if it
     * delivers, its lane reads the queue again and counts it (another instance's drop reaches it
     * through the database's notification).
     */
    public void recountParked(String subscriptionId) {
        Dispatcher delivering = sender; // read once: a take-over that failed sets it back to null
        if (delivering != null) {
            delivering.recount(subscriptionId);
        }
    }

    /** Retries the subscription's queued events now (the API's replay). */
    public void retryParkedNow(Subscription subscription) {
        Dispatcher delivering = sender; // read once: a take-over that failed sets it back to null
        if (delivering != null) {
            delivering.retryNow(subscription);
        }
    }

    /**
     * A subscription was written through this instance's API: the subscriptions are read again (through
     * {@code through}, the API's pool) and delivery told, before the API answers, so that the write
     * applies to every change committed after the answer (routing reads them at its next transaction).
     * Completes once no request starts with what the subscriptions were before ({@link Dispatcher#sync}).
     */
    public java.util.concurrent.CompletableFuture<Void> applied(io.walhook.routing.SubscriptionStore through)
            throws SQLException {
        SubscriptionRegistry r = registry;
        if (r == null) {
            return java.util.concurrent.CompletableFuture.completedFuture(null);
        }
        r.refresh(through);
        SubscriptionPoller p = poller;
        return p == null ? java.util.concurrent.CompletableFuture.completedFuture(null) : p.syncDelivery();
    }

    /** A write this instance's API answered could not be read again here: the poller reads it at its next round. */
    public void refreshSoon() {
        SubscriptionPoller p = poller;
        if (p != null) {
            p.refreshOwed();
        }
    }

    /** A subscription was deleted through this instance's API: if this one delivers, it stops at once. */
    public void deleted(String id) {
        Dispatcher delivering = sender; // read once: a take-over that failed sets it back to null
        if (delivering != null) {
            delivering.deleted(id);
        }
    }

    /** Bytes of undelivered events in memory, all subscriptions, routed and read back from durable queues; 0 before start. */
    public long deliveryMemoryBytes() {
        Dispatcher s = sender;
        return s == null ? 0 : s.memoryInUse() + s.readBackInUse();
    }

    /** Per-subscription delivery state; empty before start. */
    public List<Dispatcher.DeliveryStatus> deliveries() {
        Dispatcher s = sender;
        return s == null ? List.of() : s.status();
    }

    /** The backfills this instance runs now; none on a standby. */
    public List<io.walhook.backfill.BackfillRunner.Running> runningBackfills() {
        io.walhook.backfill.BackfillRunner runner = backfillRunner;
        return runner == null ? List.of() : runner.running();
    }

    /** Starting and controlling backfills (the API's); null before start-up read the subscriptions. */
    public io.walhook.backfill.Backfills backfills() {
        return backfills;
    }

    /** The subscriptions in force. */
    public SubscriptionRegistry registry() {
        return registry;
    }

    /** Whether this instance streams the slot or waits for it. */
    public enum Role {
        STARTING, ACTIVE, STANDBY;

        /** As /status and readiness spell it. */
        public String wireName() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    public Role role() {
        return role;
    }

    /**
     * Whether a table holds walhook's state, whose changes are never events: this deployment's
     * schema, or another deployment's that the publication publishes too (both {@code FOR ALL
     * TABLES}): its subscriptions hold their secrets and header values. Asked at each relation
     * message (once a session for each table); the catalog is read only for a table named like one
     * of walhook's, and a schema found to hold state is remembered. A database that cannot answer
     * breaks the stream, which is read again from the last acknowledged change: a user's table of
     * that name is never skipped.
     */
    private boolean stateTable(String schema, String table) {
        if (schema.equals(config.stateSchema()) || foreignStateSchemas.contains(schema)) {
            return true;
        }
        if (!io.walhook.config.SchemaMigrations.TABLE_NAMES.contains(table)) {
            return false;
        }
        try (java.sql.Connection c = dataSource.getConnection()) {
            if (!io.walhook.config.SchemaMigrations.holdsState(c, schema)) {
                return false;
            }
        } catch (SQLException e) {
            throw new IllegalStateException("cannot tell whether schema " + schema + " holds another walhook's state: "
                    + e.getMessage(), e);
        }
        foreignStateSchemas.add(schema);
        LOG.warnf("schema %s holds another walhook deployment's state (its subscriptions, with their secrets, and"
                + " queues), and publication %s publishes it: its changes are never sent. Give each deployment a"
                + " publication of its own tables (WALHOOK_PUBLICATION_TABLES)", schema, config.publication().name());
        return true;
    }

    /** Primary keys being read ({@link #primaryKey}), by table oid: the next description waits on a read not yet done. */
    private final Map<Long, java.util.concurrent.Future<java.util.List<String>>> primaryKeyReading =
            new java.util.concurrent.ConcurrentHashMap<>();
    /** When a read of a primary key last failed (System.nanoTime), 0 if none has. */
    private volatile long primaryKeyFailedAt;
    private static final long PRIMARY_KEY_BACKOFF_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
    /** How long the reader waits for a primary key (its keepalives wait meanwhile). */
    private static final long PRIMARY_KEY_WAIT_MILLIS = 1000;
    private final java.util.concurrent.ExecutorService primaryKeyReads = java.util.concurrent.Executors.newSingleThreadExecutor(
            r -> {
                Thread t = new Thread(r, "walhook-primary-keys");
                t.setDaemon(true);
                return t;
            });

    /**
     * The names of a table's primary key columns (not a covering index's INCLUDE columns), by its
     * oid; null when it has none, when a partition of it (published through its root) has an
     * identity other than FULL or the default (its old rows lack the key), or when it is not known
     * within a second (or within 30 s of a failed read). Asked by the reader at each relation
     * message of a table with REPLICA IDENTITY FULL (after a VACUUM, an ANALYZE or a GRANT too), and
     * read each time, never kept: a partition's identity changed or attached since must count. Its
     * rows' changes are ordered by the key, and a failing one holds back only its own row. A key not
     * known orders the table's changes all together, as before; any set of columns keeps a row's
     * changes in order, since a FULL update links its old and new rows, and each set is its own key
     * shape, which delivery orders against the whole table once when it changes.
     */
    private java.util.List<String> primaryKey(long oid) {
        long failed = primaryKeyFailedAt;
        if (failed != 0 && System.nanoTime() - failed < PRIMARY_KEY_BACKOFF_NANOS) {
            return null;
        }
        // the reader's thread alone asks: a read still under way is waited on again, one done since is of an
        // older description, and read anew
        java.util.concurrent.Future<java.util.List<String>> read = primaryKeyReading.get(oid);
        if (read == null || read.isDone()) {
            try {
                read = primaryKeyReads.submit(() -> readPrimaryKey(oid));
            } catch (java.util.concurrent.RejectedExecutionException stopping) {
                return null;
            }
            primaryKeyReading.put(oid, read);
        }
        try {
            java.util.List<String> key = read.get(PRIMARY_KEY_WAIT_MILLIS, java.util.concurrent.TimeUnit.MILLISECONDS);
            primaryKeyReading.remove(oid);
            return key;
        } catch (java.util.concurrent.TimeoutException e) {
            return null;
        } catch (java.util.concurrent.ExecutionException e) {
            primaryKeyReading.remove(oid);
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    private java.util.List<String> readPrimaryKey(long oid) {
        try (java.sql.Connection c = dataSource.getConnection()) {
            return primaryKeyColumns(c, oid);
        } catch (SQLException | RuntimeException e) {
            primaryKeyFailedAt = System.nanoTime();
            LOG.warnf("the primary key of table %d (REPLICA IDENTITY FULL) is not known: its changes are ordered by"
                    + " table until it is read at a later description of the table, in 30 s or more: %s", oid,
                    e.getMessage());
            return null;
        }
    }

    /**
     * A table's primary key columns in the order of the table's columns (not a covering index's
     * INCLUDE ones); null when it has none, or when a partition of it (a table, not a foreign one)
     * has an identity other than FULL or the default: such a partition writes old rows with its
     * own identity's columns only.
     */
    static java.util.List<String> primaryKeyColumns(java.sql.Connection c, long oid) throws SQLException {
        // the partitions walked through pg_inherits, not pg_partition_tree, which locks every one of them
        try (java.sql.PreparedStatement s = c.prepareStatement("WITH RECURSIVE tree(relid) AS (SELECT ?::oid UNION ALL"
                + " SELECT h.inhrelid FROM pg_catalog.pg_inherits h JOIN tree t ON h.inhparent = t.relid)"
                + " SELECT a.attname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid"
                + " AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1]) WHERE i.indrelid = ? AND i.indisprimary"
                + " AND NOT EXISTS (SELECT 1 FROM tree JOIN pg_catalog.pg_class c ON c.oid = tree.relid WHERE"
                + " c.relkind = 'r' AND c.relreplident NOT IN ('f', 'd')) ORDER BY a.attnum")) {
            s.setQueryTimeout(5);
            s.setLong(1, oid);
            s.setLong(2, oid);
            java.util.List<String> names = new java.util.ArrayList<>();
            try (java.sql.ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    names.add(rs.getString(1));
                }
            }
            return names.isEmpty() ? null : java.util.List.copyOf(names);
        }
    }

    /**
     * Why this instance is not ready because of its publication (dropped while it streams); null while
     * the publication is there, and on a standby.
     */
    public String publicationProblem() {
        io.walhook.source.SourceStatus status = status();
        // an invalid slot says more: changes were lost to it, whatever the publication
        return role == Role.ACTIVE && (status == null || status.state() != io.walhook.source.SourceStatus.State.SLOT_INVALID)
                ? publication.problem() : null;
    }

    /** Times the active instance found its publication missing, or dropped and created again, since it started. */
    public long publicationDrops() {
        return publication.dropped();
    }

    /** Why routing stopped, or null while it runs (or has not started). */
    public String routingFailure() {
        Thread routing = drain;
        if (stopping || routing != null && routing.isAlive()) {
            return null;
        }
        // not started: null, unless starting failed
        return routing == null || routingFailure != null ? routingFailure : "the routing thread ended";
    }

    private static PreventFurtherStepsException stop(String problem) {
        return stop(SourceUrl.VARIABLE, problem);
    }

    private static PreventFurtherStepsException stop(String variable, String problem) {
        return StartupCheck.stop(new ConfigException(variable, problem));
    }

    /**
     * A start-up that fails after the poller and the lease keeper started, and maybe the dispatcher
     * (whose lanes read their durable queues): they end before the container shuts down under them,
     * which fires no shutdown event after a failed start. Returns {@code stop}.
     */
    private PreventFurtherStepsException stopWatching(PreventFurtherStepsException stop) {
        poller.stop();
        leaseKeeper.interrupt();
        Dispatcher started = sender;
        if (started != null) {
            started.close();
        }
        return stop;
    }

    /**
     * Another instance holds the slot's lock now and delivers from the checkpoint: this one stops
     * delivering at once (requests under way end; nothing due is sent), rather than in a grace
     * period beside the other, where a retry of an older change of a row could reach the
     * destination after the other's newer one.
     */
    private void lockLost() {
        lockLost = true;
        io.walhook.backfill.BackfillRunner running = backfillRunner;
        if (running != null) {
            running.stop();
        }
        Dispatcher delivering = sender;
        if (delivering != null) {
            delivering.close();
        }
    }

    /**
     * SIGTERM: stop reading, give in-flight deliveries the grace period to finish, acknowledge what
     * was delivered, close the stream, then release the slot's lock for a standby. What is not
     * delivered by then is read again by the next active instance, with the same ids.
     */
    void onStop(@Observes ShutdownEvent event) throws InterruptedException {
        synchronized (this) {
            stopping = true;
        }
        if (standby != null) {
            standby.interrupt();
        }
        if (backfillRunner != null) {
            backfillRunner.stop(); // no new chunk; those in flight are delivered in the grace period, or read again
            backfillThread.interrupt();
        }
        if (reader != null) {
            if (lockLost) {
                reader.stop(Duration.ofSeconds(5)); // nothing more is delivered here: no grace to wait out
            } else {
                reader.drain(config.shutdownGracePeriod());
            }
        }
        if (drain != null) {
            drain.interrupt();
        }
        if (poller != null) {
            poller.stop();
        }
        Dispatcher delivering = sender;
        if (delivering != null) {
            delivering.close();
        }
        if (broker != null) {
            broker.close();
        }
        webhookClient.close();
        primaryKeyReads.shutdownNow();
        if (leaseKeeper != null) {
            leaseKeeper.interrupt();
        }
        if (lock != null) {
            if (lockLost) {
                lock.close();
            } else {
                lock.release(); // nothing is sent from here any more: the next holder need not wait out the lease
            }
        }
        gauges.forEach(metrics::remove);
    }

    /** The HTTP client of every webhook (delivery and the API's test-fire). */
    public io.walhook.delivery.WebhookClient webhooks() {
        return webhookClient;
    }

    /** Whether AMQP subscriptions have a broker to go to. */
    public boolean hasBroker() {
        return broker != null;
    }

    /** Null before start-up finished. */
    public SourceStatus status() {
        ReplicationReader r = reader;
        return r == null ? null : r.status();
    }
}
