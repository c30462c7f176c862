package io.walhook.api;

import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import jakarta.inject.Singleton;

import io.quarkus.reactive.pg.client.PgPoolCreator;
import io.vertx.core.Future;
import io.vertx.pgclient.PgBuilder;
import io.vertx.pgclient.PgConnectOptions;
import io.vertx.sqlclient.Pool;
import io.walhook.config.SessionTimeout;

/**
 * The reactive pool behind {@code GET /status}, with the limit walhook's JDBC sessions have
 * ({@link SessionTimeout}): a connection that has neither read nor written for that long is closed.
 * A query on a connection a failover left half-open then fails (a 503) instead of waiting forever
 * and keeping its connection from the pool; an idle connection is opened again when next needed.
 */
@Singleton
public class StatusPoolCreator implements PgPoolCreator {

    @Override
    public Pool create(Input input) {
        List<PgConnectOptions> servers = input.pgConnectOptionsList();
        for (PgConnectOptions options : servers) {
            options.setIdleTimeout((int) SessionTimeout.LIMIT.toSeconds()).setIdleTimeoutUnit(TimeUnit.SECONDS);
        }
        var pool = PgBuilder.pool().with(input.poolOptions()).using(input.vertx());
        if (servers.size() == 1) {
            return pool.connectingTo(servers.get(0)).build();
        }
        AtomicInteger next = new AtomicInteger(); // in turn, as Quarkus's own pool takes them
        return pool.connectingTo(() -> Future.succeededFuture(servers.get(Math.floorMod(next.getAndIncrement(),
                servers.size())))).build();
    }
}
