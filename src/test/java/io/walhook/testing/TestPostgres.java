package io.walhook.testing;

import java.net.URI;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Gives tests a real PostgreSQL with {@code wal_level=logical}, started once per test run (per
 * major version) and torn down when the JVM exits.
 *
 * <ul>
 *   <li>{@code WALHOOK_TEST_PG_URL=postgresql://user:password@host:port/db}: use that server instead;</li>
 *   <li>{@code -Dharness.pg=15}: the major version tests get by default (17 otherwise);</li>
 *   <li>{@code -Dharness.pg.provider=testcontainers}: start {@code postgres:<major>} with
 *       Testcontainers (needs a Docker engine);</li>
 *   <li>otherwise an {@link EmbeddedPostgres} from the machine's or Maven Central's binaries.</li>
 * </ul>
 */
public final class TestPostgres {

    private static final Map<Integer, PostgresServer> SERVERS = new ConcurrentHashMap<>();
    private static volatile PostgresServer external;

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> SERVERS.values().forEach(PostgresServer::stop),
                "walhook-test-postgres-stop"));
    }

    private TestPostgres() {
    }

    public static int defaultMajor() {
        String value = System.getProperty("harness.pg", "17");
        try {
            return Integer.parseInt(value.trim());
        } catch (NumberFormatException e) {
            throw new HarnessException("-Dharness.pg must be a PostgreSQL major version such as 15 or 17, not '" + value + "'");
        }
    }

    /** The server tests use unless they need a particular major version. */
    public static PostgresServer shared() {
        String url = System.getenv("WALHOOK_TEST_PG_URL");
        if (url != null && !url.isBlank()) {
            PostgresServer server = external;
            if (server == null) {
                synchronized (TestPostgres.class) {
                    if (external == null) {
                        external = ExternalPostgres.open(url);
                    }
                    server = external;
                }
            }
            return server;
        }
        return shared(defaultMajor());
    }

    /** A server of this major version, started on first use. */
    public static PostgresServer shared(int major) {
        return SERVERS.computeIfAbsent(major, TestPostgres::start);
    }

    private static PostgresServer start(int major) {
        String provider = System.getProperty("harness.pg.provider", "embedded");
        return switch (provider) {
            case "embedded" -> EmbeddedPostgres.builder().major(major).start();
            case "testcontainers" -> ContainerPostgres.start(major);
            default -> throw new HarnessException("-Dharness.pg.provider must be 'embedded' or 'testcontainers', not '"
                    + provider + "'");
        };
    }

    /** A server this harness did not start, named by {@code WALHOOK_TEST_PG_URL}. */
    static final class ExternalPostgres implements PostgresServer {
        private final String host;
        private final int port;
        private final String user;
        private final String password;
        private final String database;
        private int major;

        private ExternalPostgres(String host, int port, String user, String password, String database) {
            this.host = host;
            this.port = port;
            this.user = user;
            this.password = password;
            this.database = database;
        }

        static ExternalPostgres open(String url) {
            URI uri;
            try {
                uri = URI.create(url);
            } catch (IllegalArgumentException e) {
                throw new HarnessException("WALHOOK_TEST_PG_URL is not a URL: " + e.getMessage());
            }
            if (!"postgresql".equals(uri.getScheme()) && !"postgres".equals(uri.getScheme()) || uri.getHost() == null) {
                throw new HarnessException("WALHOOK_TEST_PG_URL must look like postgresql://user:password@host:port/database, not " + url);
            }
            String[] info = uri.getUserInfo() == null ? new String[] {"postgres"} : uri.getUserInfo().split(":", 2);
            String db = uri.getPath() == null || uri.getPath().length() <= 1 ? "postgres" : uri.getPath().substring(1);
            ExternalPostgres server = new ExternalPostgres(uri.getHost(), uri.getPort() < 0 ? 5432 : uri.getPort(),
                    info[0], info.length > 1 ? info[1] : "", db);
            try (Connection c = server.connect(db); Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT current_setting('server_version_num')::int / 10000,"
                         + " current_setting('wal_level')")) {
                rs.next();
                server.major = rs.getInt(1);
                if (!"logical".equals(rs.getString(2))) {
                    throw new HarnessException("WALHOOK_TEST_PG_URL points at a server with wal_level=" + rs.getString(2)
                            + "; the tests need wal_level=logical");
                }
            } catch (SQLException e) {
                throw new HarnessException("cannot connect to WALHOOK_TEST_PG_URL (" + uri.getHost() + ":" + server.port
                        + "): " + e.getMessage(), e);
            }
            return server;
        }

        @Override public int major() { return major; }
        @Override public String host() { return host; }
        @Override public int port() { return port; }
        @Override public String user() { return user; }
        @Override public String password() { return password; }
        @Override public String defaultDatabase() { return database; }
        @Override public Optional<java.nio.file.Path> binDir() { return Optional.empty(); }
        @Override public void stop() { }
    }
}
