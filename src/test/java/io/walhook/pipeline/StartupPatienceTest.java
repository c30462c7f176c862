package io.walhook.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.SQLException;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

/**
 * A refused connection is a wrong address at a start's first step, and a restart under way once the
 * database has answered a step of the same start: PostgreSQL restarted between walhook reading its
 * subscriptions and taking the slot's lock, and walhook exited ("cannot take the lock ... The
 * connection attempt failed"), found by the fault-injection run.
 */
class StartupPatienceTest {

    private static final SQLException REFUSED = new SQLException("The connection attempt failed.", "08001");

    @Test
    void aConnectionRefusedAtTheFirstStepStopsTheStartAtOnce() {
        StartupPatience patience = new StartupPatience(10);
        AtomicInteger tries = new AtomicInteger();
        assertThatThrownBy(() -> patience.run(() -> {
            tries.incrementAndGet();
            throw REFUSED;
        })).isSameAs(REFUSED);
        assertThat(tries.get()).isOne();
    }

    @Test
    void aConnectionRefusedAfterTheDatabaseAnsweredIsARestartWaitedFor() throws Exception {
        StartupPatience patience = new StartupPatience(10);
        assertThat(patience.run(() -> "subscriptions read")).isEqualTo("subscriptions read");
        AtomicInteger tries = new AtomicInteger();
        assertThat(patience.run(() -> {
            if (tries.incrementAndGet() < 3) {
                throw REFUSED; // the server restarting
            }
            return true;
        })).isTrue();
        assertThat(tries.get()).isEqualTo(3);
    }

    @Test
    void aRestartUnderWayIsWaitedForFromTheFirstStep() throws Exception {
        StartupPatience patience = new StartupPatience(10);
        AtomicInteger tries = new AtomicInteger();
        assertThat(patience.run(() -> {
            if (tries.incrementAndGet() < 2) {
                throw new SQLException("the database system is starting up", "57P03");
            }
            return "up";
        })).isEqualTo("up");
    }
}
