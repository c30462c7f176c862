package io.walhook.pgoutput;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Runs {@link PgOutputScenario}s on a live server of one major version and captures what
 * {@code pg_logical_slot_peek_binary_changes} returns at every protocol version the server supports.
 *
 * <p>One database per major, made on first use with the {@link PgOutputScenario#SHARED_OBJECTS}.
 * Each scenario runs once, on first use: its tables and publication, then its slot, then its SQL,
 * then one peek per protocol version (peeking does not consume, so every version sees the same
 * WAL), then the slot is dropped. The peeking session pins the settings that shape text output
 * (as walhook's replication connection does) and {@code logical_decoding_work_mem = 64kB}.
 */
final class PgOutputLiveCaptures {

    static final int[] MAJORS = {14, 15, 16, 17, 18};

    private static final Map<Integer, PgOutputLiveCaptures> BY_MAJOR = new ConcurrentHashMap<>();

    private static final String[] PEEK_SETTINGS = {
        "SET logical_decoding_work_mem = '64kB'",
        "SET TimeZone = 'UTC'",
        "SET DateStyle = 'ISO, MDY'",
        "SET IntervalStyle = 'postgres'",
        "SET extra_float_digits = 3",
        "SET bytea_output = 'hex'",
        "SET lc_monetary = 'C'",
    };

    /** A committed write, so that everything before it is flushed (14 sends it as an empty pair, 15+ nothing). */
    static final String FLUSH = "INSERT INTO ballast (pad) VALUES ('flush')";

    private final int major;
    private final PostgresServer server;
    private final String database;
    private final String serverVersion;
    private final Map<PgOutputScenario, List<PgOutputCapture>> captures = new EnumMap<>(PgOutputScenario.class);
    private final Map<PgOutputScenario, RuntimeException> failures = new EnumMap<>(PgOutputScenario.class);

    private PgOutputLiveCaptures(int major) {
        this.major = major;
        this.server = TestPostgres.shared(major);
        this.database = server.createDatabase("pgoutput");
        try (Connection c = connect(); Statement s = c.createStatement()) {
            for (String sql : PgOutputScenario.SHARED_OBJECTS) {
                s.execute(sql);
            }
            try (ResultSet rs = s.executeQuery("SELECT current_setting('server_version')")) {
                rs.next();
                // "16.9" or "15.20 (Debian 15.20-0+deb12u1)": the version number is enough
                this.serverVersion = rs.getString(1).split(" ")[0];
            }
        } catch (SQLException e) {
            throw new IllegalStateException("PostgreSQL " + major + ": cannot prepare " + database + ": " + e.getMessage(), e);
        }
    }

    static PgOutputLiveCaptures of(int major) {
        return BY_MAJOR.computeIfAbsent(major, PgOutputLiveCaptures::new);
    }

    int major() {
        return major;
    }

    Connection connect() throws SQLException {
        return server.connect(database);
    }

    /** The captures of a scenario, one per protocol version from 1 up, running it on first use. */
    synchronized List<PgOutputCapture> captures(PgOutputScenario scenario) {
        RuntimeException failed = failures.get(scenario);
        if (failed != null) {
            // a scenario runs once: later tests report the first failure, not "table already exists"
            throw new IllegalStateException("PostgreSQL " + major + ", scenario " + scenario.id() + " failed earlier: "
                    + failed.getMessage(), failed);
        }
        List<PgOutputCapture> known = captures.get(scenario);
        if (known == null) {
            try {
                known = run(scenario);
            } catch (RuntimeException e) {
                failures.put(scenario, e);
                throw e;
            }
            captures.put(scenario, known);
        }
        return known;
    }

    private List<PgOutputCapture> run(PgOutputScenario scenario) {
        String slot = "conformance_" + scenario.id().replace('-', '_');
        Map<String, Long> facts = new LinkedHashMap<>();
        try (ScenarioSession sql = new ScenarioSession(major, this::connect, facts);
             Connection peek = connect()) {
            scenario.setUp(sql);
            try (Statement s = peek.createStatement()) {
                for (String setting : PEEK_SETTINGS) {
                    s.execute(setting);
                }
            }
            try (PreparedStatement create = peek.prepareStatement(
                    "SELECT lsn::text FROM pg_create_logical_replication_slot(?, 'pgoutput', false, ?)")) {
                create.setString(1, slot);
                create.setBoolean(2, scenario.twoPhaseSlot());
                create.executeQuery().close();
            }
            try {
                scenario.run(sql);
                // A peek decodes up to the flushed end of WAL, and only commits flush: without this
                // a final rollback (its abort record, a non-transactional message) may not be seen yet.
                sql.exec(FLUSH);
                List<PgOutputCapture> result = new ArrayList<>();
                for (int protocol = 1; protocol <= PgOutputScenario.maxProtocol(major); protocol++) {
                    Map<String, String> options = scenario.options(major, protocol);
                    result.add(new PgOutputCapture(scenario.id(), major, serverVersion, options, facts,
                            peek(peek, slot, options)));
                }
                return List.copyOf(result);
            } finally {
                try (PreparedStatement drop = peek.prepareStatement("SELECT pg_drop_replication_slot(?)")) {
                    drop.setString(1, slot);
                    drop.execute();
                }
            }
        } catch (SQLException e) {
            throw new IllegalStateException("PostgreSQL " + major + ", scenario " + scenario.id() + ": " + e.getMessage(), e);
        }
    }

    private static List<PgOutputCapture.Row> peek(Connection peek, String slot, Map<String, String> options)
            throws SQLException {
        List<String> flat = new ArrayList<>();
        options.forEach((k, v) -> {
            flat.add(k);
            flat.add(v);
        });
        List<PgOutputCapture.Row> rows = new ArrayList<>();
        try (PreparedStatement s = peek.prepareStatement("SELECT lsn::text, xid::text::bigint, data"
                + " FROM pg_logical_slot_peek_binary_changes(?, NULL, NULL, VARIADIC ?::text[])")) {
            s.setString(1, slot);
            s.setArray(2, peek.createArrayOf("text", flat.toArray()));
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    rows.add(new PgOutputCapture.Row(Lsn.parse(rs.getString(1)), rs.getLong(2), rs.getBytes(3)));
                }
            }
        }
        return rows;
    }
}
