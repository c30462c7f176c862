package io.walhook.api;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import jakarta.inject.Inject;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.MediaType;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.Tuple;
import io.walhook.config.WalhookConfig;
import io.walhook.delivery.Dispatcher;
import io.walhook.routing.Subscription;
import io.walhook.routing.SubscriptionRegistry;
import io.walhook.pipeline.ReplicationSource;
import io.walhook.source.SourceStatus;

/** {@code GET /status}: where the slot stands against the server, and what walhook has acknowledged. */
@Path("/status")
public class StatusResource {

    private final Pool pool;
    private final WalhookConfig config;
    private final String query;

    private final ReplicationSource source;

    /** How long a standby's count of the durable queues may take: /status answers without them rather than wait. */
    private static final java.time.Duration QUEUE_COUNT_LIMIT = java.time.Duration.ofSeconds(2);
    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger(StatusResource.class);
    /** When a standby last said its queues went uncounted (at most once a minute). */
    private static volatile long lastUncounted = System.nanoTime() - java.util.concurrent.TimeUnit.MINUTES.toNanos(2);

    @Inject
    public StatusResource(Pool pool, WalhookConfig config, ReplicationSource source) {
        this.pool = pool;
        this.config = config;
        this.source = source;
        // state-schema is validated as a plain identifier at start-up
        this.query = """
                SELECT pg_current_wal_lsn()::text AS server_lsn,
                       s.slot_name IS NOT NULL AS slot_exists, s.active,
                       s.confirmed_flush_lsn::text AS confirmed_flush_lsn, s.restart_lsn::text AS restart_lsn,
                       s.wal_status,
                       pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint AS lag_bytes,
                       (SELECT c.end_lsn::text FROM %s.checkpoint c WHERE c.slot_name = $1) AS checkpoint_lsn
                FROM (SELECT 1) AS one
                LEFT JOIN pg_replication_slots s ON s.slot_name = $1
                """.formatted(config.stateSchema());
    }

    @GET
    @Produces(MediaType.APPLICATION_JSON)
    public Uni<StatusView> status() {
        // on a connection taken from the pool first: the pool's own query shortcut (Vert.x SQL client 4.5) left its
        // wait for a connection armed when taking one failed, and reported it as an uncaught error when it ran out
        boolean standby = source.role() == ReplicationSource.Role.STANDBY;
        return pool.withConnection(c -> c.preparedQuery(query).execute(Tuple.of(config.slot()))
                .chain(rows -> (standby ? queues(c) : Uni.createFrom().item(Map.<String, Long>of()))
                        .map(queues -> toView(rows.iterator().next(), queues))))
                .onFailure().transform(StatusResource::unavailable);
    }

    /**
     * The durable queues as a standby sees them, counted by the server within {@link
     * #QUEUE_COUNT_LIMIT} (none when it does not: a queue of millions): the active instance's lanes
     * count their own, a standby has none, and its zeros hid every dead letter.
     */
    private Uni<Map<String, Long>> queues(io.vertx.mutiny.sqlclient.SqlConnection c) {
        return c.begin().chain(tx -> c.query("SET LOCAL statement_timeout = " + QUEUE_COUNT_LIMIT.toMillis()).execute()
                .chain(() -> c.query("SELECT subscription_id, count(*) FROM " + config.stateSchema()
                        + ".parked_event GROUP BY subscription_id").execute())
                .map(rows -> {
                    Map<String, Long> counts = new java.util.HashMap<>();
                    rows.forEach(row -> counts.put(row.getString(0), row.getLong(1)));
                    return counts;
                })
                .eventually(() -> tx.rollback()))
                .onFailure().recoverWithItem(e -> {
                    long now = System.nanoTime();
                    if (now - lastUncounted > java.util.concurrent.TimeUnit.MINUTES.toNanos(1)) {
                        lastUncounted = now;
                        LOG.warnf("/status on this standby shows the durable queues as 0: the server did not count them"
                                + " within %s (%s)", QUEUE_COUNT_LIMIT, e.getMessage());
                    }
                    return Map.of();
                });
    }

    /** A database that cannot be reached is a 503, as for the other endpoints; an SQL error stays a 500. */
    private static Throwable unavailable(Throwable e) {
        if (e instanceof io.vertx.pgclient.PgException pg && !ProblemMapper.unreachable(pg.getSqlState())) {
            return e;
        }
        return ProblemMapper.unavailable(e.getMessage());
    }

    private StatusView toView(Row row, Map<String, Long> queues) {
        StatusView.SlotView slot = new StatusView.SlotView(config.slot(), row.getBoolean("slot_exists"),
                row.getBoolean("active"), row.getString("confirmed_flush_lsn"), row.getString("restart_lsn"),
                row.getString("wal_status"));
        SourceStatus s = source.status();
        String routingFailure = source.routingFailure();
        String publicationProblem = source.publicationProblem();
        StatusView.ReplicationView replication = s == null ? null : new StatusView.ReplicationView(
                routingFailure != null ? "ROUTING_STOPPED" : publicationProblem != null ? "PUBLICATION_MISSING" : s.state().name(),
                routingFailure != null ? routingFailure : publicationProblem != null ? publicationProblem : s.lastError(),
                s.received().toString(), s.acknowledged().toString(), s.events(),
                s.pendingTransactions(), s.openStreams(), s.spilledTransactions());
        return new StatusView(source.role().wireName(), slot, row.getString("server_lsn"),
                row.getLong("lag_bytes"), row.getString("checkpoint_lsn"), replication, subscriptions(queues));
    }

    private List<StatusView.BackfillStatusView> backfills(String subscriptionId) {
        return source.runningBackfills().stream().filter(b -> b.subscriptionId().equals(subscriptionId))
                .map(b -> new StatusView.BackfillStatusView(b.id().toString(), b.rowsSent())).toList();
    }

    /** Events its filter failed on since it was last compiled (created, replaced or started): not sent to it. */
    private static long filterErrors(Subscription subscription) {
        return subscription.filter().map(io.walhook.routing.CelFilter::errorCount).orElse(0L);
    }

    private static String filterLastError(Subscription subscription) {
        return subscription.filter().map(io.walhook.routing.CelFilter::lastError).orElse(null);
    }

    /**
     * Every subscription in force, by name: those no event has reached yet with zeros; on a standby,
     * with its durable queue as {@code queues} counts it (one with rows in it is durable).
     */
    private List<StatusView.SubscriptionStatusView> subscriptions(Map<String, Long> queues) {
        Map<String, StatusView.SubscriptionStatusView> byId = new java.util.HashMap<>();
        SubscriptionRegistry registry = source.registry();
        if (registry != null) {
            for (Subscription subscription : registry.router().subscriptions()) {
                long parked = queues.getOrDefault(subscription.id(), 0L);
                byId.put(subscription.id(), new StatusView.SubscriptionStatusView(subscription.id(), subscription.name(),
                        parked > 0 ? "durable" : "direct", 0, 0, 0, 0, parked, null, 0, 0, null, false,
                        registry.isPaused(subscription.id()),
                        backfills(subscription.id()), filterErrors(subscription), filterLastError(subscription)));
            }
        }
        for (Dispatcher.DeliveryStatus d : source.deliveries()) {
            StatusView.SubscriptionStatusView inForce = byId.get(d.id());
            if (inForce != null) {
                byId.put(d.id(), new StatusView.SubscriptionStatusView(d.id(), inForce.name(), d.mode(),
                        d.queued(), d.inFlight(), d.retrying(), d.heldBack(), d.durableBacklog(),
                        d.oldestParkedCommit() == null ? null : d.oldestParkedCommit().toString(),
                        Math.round(d.drainRate() * 10) / 10.0, d.delivered(), d.lastError(), d.disabled(), d.paused(),
                        backfills(d.id()), inForce.filterErrors(), inForce.filterLastError()));
            }
        }
        List<StatusView.SubscriptionStatusView> all = new java.util.ArrayList<>(byId.values());
        all.sort(java.util.Comparator.comparing(StatusView.SubscriptionStatusView::name));
        return all;
    }
}
