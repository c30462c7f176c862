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
            PGSimpleDataSource impatient = new PGSimpleDataSource();
            impatient.setUrl(source.dataSource.getUrl());
            impatient.setUser(source.dataSource.getUser());
            impatient.setPassword(source.dataSource.getPassword());
            impatient.setSocketTimeout(1); // the pool's limit, made 1 s
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
                await().pollDelay(Duration.ofSeconds(3)).until(() -> true); // three times the limit
                assertThat(created).as("waits for the transaction").isNotDone();
                open.commit();
                created.get(1, TimeUnit.MINUTES);
            }
            assertThat(source.queryOne("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + source.slot + "'"))
                    .isEqualTo("1");
        }
    }

    @Test
    void workWithoutTheLimitPutsItBackAfter() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "unlimited");
             Connection c = source.dataSource.getConnection()) {
            c.setNetworkTimeout(Runnable::run, 1000);
            int inside = SessionTimeout.unlimited(c, u -> {
                try (Statement s = u.createStatement()) {
                    s.execute("SELECT pg_sleep(2)"); // twice the limit
                }
                return u.getNetworkTimeout();
            });
            assertThat(inside).isZero();
            assertThat(c.getNetworkTimeout()).isEqualTo(1000);
            try (Statement s = c.createStatement()) {
                org.assertj.core.api.Assertions.assertThatThrownBy(() -> s.execute("SELECT pg_sleep(3)"))
                        .as("the limit is back").isInstanceOf(java.sql.SQLException.class);
            }
        }
    }
}
