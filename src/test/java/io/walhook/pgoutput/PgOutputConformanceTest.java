package io.walhook.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The pgoutput decoder against live PostgreSQL 14, 15, 16, 17 and 18, at every protocol version
 * each supports: every scenario's bytes come from {@code pg_logical_slot_peek_binary_changes} and
 * each decoded message is checked field by field ({@link PgOutputScenarioChecks}). Servers come
 * from the test harness, one per major, started once per JVM.
 */
class PgOutputConformanceTest extends PgOutputScenarioChecks {

    @Override
    protected List<PgOutputCapture> captures(PgOutputScenario scenario, int major) {
        return PgOutputLiveCaptures.of(major).captures(scenario);
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void everyProtocolVersionTheServerSupportsIsCaptured(int major) {
        for (PgOutputScenario scenario : PgOutputScenario.values()) {
            List<Integer> protocols = captures(scenario, major).stream().map(PgOutputCapture::protocol).toList();
            List<Integer> expected = new ArrayList<>();
            for (int p = 1; p <= PgOutputScenario.maxProtocol(major); p++) {
                expected.add(p);
            }
            assertThat(protocols).as(scenario.id()).isEqualTo(expected);
        }
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void transactionsWithoutStreamingOrTwoPhaseAreTheSameBytesAtEveryProtocolVersion(int major) {
        for (PgOutputScenario scenario : PgOutputScenario.values()) {
            if (scenario.protocolSensitive()) {
                continue;
            }
            List<PgOutputCapture> captures = captures(scenario, major);
            List<String> first = hexRows(captures.get(0));
            for (PgOutputCapture capture : captures) {
                assertThat(hexRows(capture)).as(capture.describe()).isEqualTo(first);
            }
        }
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void updateOfATableWithoutReplicaIdentityIsRefusedWhenItsUpdatesArePublished(int major) throws SQLException {
        try (Connection c = PgOutputLiveCaptures.of(major).connect(); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE refused (id int PRIMARY KEY, v text)");
            s.execute("ALTER TABLE refused REPLICA IDENTITY NOTHING");
            s.execute("CREATE PUBLICATION refused_pub FOR TABLE refused");
            s.execute("INSERT INTO refused VALUES (1, 'x')");
            assertThatThrownBy(() -> s.execute("UPDATE refused SET v = 'y'")).isInstanceOf(SQLException.class)
                    .hasMessageContaining("does not have a replica identity and publishes updates");
        }
    }

    @ParameterizedTest(name = "PostgreSQL {0}")
    @MethodSource("majors")
    void protocolVersionAboveTheServersIsRefused(int major) throws SQLException {
        try (Connection c = PgOutputLiveCaptures.of(major).connect(); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE too_high (id int PRIMARY KEY)");
            s.execute("CREATE PUBLICATION too_high_pub FOR TABLE too_high");
            s.execute("SELECT pg_create_logical_replication_slot('too_high', 'pgoutput', true)");
            int tooHigh = PgOutputScenario.maxProtocol(major) + 1;
            assertThatThrownBy(() -> s.executeQuery("SELECT * FROM pg_logical_slot_peek_binary_changes('too_high',"
                    + " NULL, NULL, 'proto_version', '" + tooHigh + "', 'publication_names', 'too_high_pub')"))
                    .isInstanceOf(SQLException.class).hasMessageContaining("proto_version=" + tooHigh);
        }
    }

    private static List<String> hexRows(PgOutputCapture capture) {
        return capture.rows().stream().map(r -> HexFormat.of().formatHex(r.data())).toList();
    }
}
