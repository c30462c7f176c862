package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.SocketTimeoutException;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

import org.junit.jupiter.api.Test;

import io.walhook.source.SourceFixture;
import io.walhook.testing.TestPostgres;

/** A durable write that fails says why, even when the failure broke its connection. */
class DurableWriteTest {

    @Test
    void aWriteWhoseSessionGaveUpOnTheServerSaysSoRatherThanThatItsConnectionIsClosed() throws Exception {
        try (SourceFixture source = new SourceFixture(TestPostgres.shared(), "durable_write");
             Connection c = source.dataSource.getConnection()) {
            c.setNetworkTimeout(Runnable::run, 1000);
            // the session gives up and closes the connection: the rollback after it fails too
            assertThatThrownBy(() -> DurableWrite.run(c, t -> {
                try (Statement s = t.createStatement()) {
                    return s.execute("SELECT pg_sleep(3)");
                }
            })).isInstanceOf(SQLException.class).hasRootCauseInstanceOf(SocketTimeoutException.class)
                    .satisfies(e -> assertThat(e.getSuppressed()).as("the rollback's own failure, kept").isNotEmpty());
            assertThat(c.isClosed()).isTrue();
        }
    }
}
