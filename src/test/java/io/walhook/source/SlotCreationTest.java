package io.walhook.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

import io.walhook.config.SessionTimeout;
import io.walhook.testing.TestPostgres;

/**
 * Statements that may rightly wait longer than a session waits for a silent server
 * ({@link SessionTimeout}): they lift the limit while they run and put it back after.
 */
class SlotCreationTest {

    @Test
    void aSlotIsCreatedBehindATransactionOpenLongerThanASessionWaitsForAnAnswer() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "slot_wait")) {
            PGSimpleDataSource impatient = source.limited(2, 1000);
            SourceDatabase database = new SourceDatabase(impatient);
            try (Connection open = source.dataSource.getConnection(); Statement s = open.createStatement()) {
                open.setAutoCommit(false);
                s.execute("SELECT pg_current_xact_id()"); // a transaction with an id: a new slot waits for its end
                CompletableFuture<Void> created = CompletableFuture.runAsync(() -> {
                    try {
                        database.ensureSlot(source.slot, Optional.empty());
                    } catch (java.sql.SQLException e) {
                        throw new IllegalStateException(e);
                    }
                });
                await().pollDelay(Duration.ofSeconds(4)).until(() -> true); // twice the limit
                assertThat(created).as("waits for the transaction").isNotDone();
                open.commit();
                created.get(1, TimeUnit.MINUTES);
            }
            assertThat(source.queryOne("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + source.slot + "'"))
                    .isEqualTo("1");
        }
    }

    @Test
    void aPublicationIsCreatedBehindATableLockHeldLongerThanASessionWaitsForAnAnswer() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "publication_wait")) {
            source.sql("CREATE TABLE orders (id int PRIMARY KEY)");
            PGSimpleDataSource impatient = source.limited(2, 1000);
            SourceDatabase database = new SourceDatabase(impatient);
            try (Connection vacuum = source.dataSource.getConnection(); Statement s = vacuum.createStatement()) {
                vacuum.setAutoCommit(false);
                s.execute("LOCK TABLE orders IN SHARE UPDATE EXCLUSIVE MODE"); // as a VACUUM or ANALYZE holds it
                CompletableFuture<Void> created = CompletableFuture.runAsync(() -> {
                    try {
                        database.ensurePublication("waits", "public.orders");
                    } catch (java.sql.SQLException e) {
                        throw new IllegalStateException(e);
                    }
                });
                await().pollDelay(Duration.ofSeconds(4)).until(() -> true); // twice the limit
                assertThat(created).as("waits for the table's lock").isNotDone();
                vacuum.commit();
                created.get(1, TimeUnit.MINUTES);
            }
            assertThat(source.queryOne("SELECT count(*) FROM pg_publication_tables WHERE pubname = 'waits'")).isEqualTo("1");
        }
    }

    @Test
    void workWithoutTheLimitsPutsThemBackAfter() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "unlimited")) {
            PGSimpleDataSource limited = source.limited(3, 1000);
            try (Connection c = limited.getConnection()) {
                int inside = SessionTimeout.unlimited(limited, c, u -> {
                    try (Statement s = u.createStatement()) {
                        s.execute("SELECT pg_sleep(4)"); // past both limits
                    }
                    return u.getNetworkTimeout();
                });
                assertThat(inside).isZero();
                assertThat(c.getNetworkTimeout()).isEqualTo(3000);
                try (Statement s = c.createStatement(); java.sql.ResultSet rs = s.executeQuery("SHOW statement_timeout")) {
                    rs.next();
                    assertThat(rs.getString(1)).as("the session's own, from its options").isEqualTo("1s");
                }
                try (Statement s = c.createStatement()) {
                    org.assertj.core.api.Assertions.assertThatThrownBy(() -> s.execute("SELECT pg_sleep(2)"))
                            .as("the limits are back").isInstanceOf(java.sql.SQLException.class);
                }
            }
        }
    }

    /**
     * Work without a limit on a connection a failover left half-open: the old server ended the session
     * (as it does once it finds its client gone); asked on another connection, it says the session
     * is gone, and the work fails through its connection rather than wait forever (a
     * count of dead letters holding one of the API's two connections and a worker, a migration
     * holding start-up).
     */
    @Test
    void workWithoutTheLimitsOnAConnectionLeftHalfOpenFailsOnceTheServerLetItsSessionGo() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "unlimited_half_open");
                io.walhook.testing.TcpProxy proxy = io.walhook.testing.TcpProxy.to(TestPostgres.shared().host(),
                        TestPostgres.shared().port())) {
            PGSimpleDataSource limited = source.limited(3, 1000);
            PGSimpleDataSource through = source.limited(3, 1000);
            through.setUrl(limited.getUrl().replace(":" + TestPostgres.shared().port() + "/", ":" + proxy.port() + "/"));
            try (Connection c = through.getConnection()) {
                CompletableFuture<Void> working = CompletableFuture.runAsync(() -> {
                    try {
                        SessionTimeout.unlimited(limited, c, u -> {
                            try (Statement s = u.createStatement()) {
                                return s.execute("SELECT pg_sleep(120)");
                            }
                        });
                    } catch (java.sql.SQLException e) {
                        throw new java.util.concurrent.CompletionException(e);
                    }
                });
                await().atMost(Duration.ofSeconds(30)).until(() -> "1".equals(source.queryOne("SELECT count(*) FROM"
                        + " pg_stat_activity WHERE query = 'SELECT pg_sleep(120)' AND state = 'active'")));
                proxy.loseServerOfAll();
                // as the old server does once it finds its client gone
                source.queryOne("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        + " WHERE query = 'SELECT pg_sleep(120)' AND state = 'active'");
                org.assertj.core.api.Assertions.assertThatThrownBy(() -> working.get(1, TimeUnit.MINUTES))
                        .as("failed, not waiting still").hasCauseInstanceOf(java.sql.SQLException.class);
                assertThat(c.isClosed()).isTrue();
            }
        }
    }
}
