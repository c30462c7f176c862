package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TcpProxy;
import io.walhook.testing.TestPostgres;

/** walhook's schema migrations against a real PostgreSQL, in the record Flyway kept before them. */
class SchemaMigrationsTest {

    /**
     * The rows Flyway 12 wrote for these files (read from a schema it migrated): the same
     * checksums mean a schema either migrated is carried on by the other.
     */
    private static final List<String> FLYWAY_ROWS = List.of(
            "0|null|<< Flyway Schema Creation >>|SCHEMA|\"walhook\"|null|true",
            "1|1|checkpoint|SQL|db/migration/V1__checkpoint.sql|442512879|true",
            "2|2|subscription|SQL|db/migration/V2__subscription.sql|888921365|true",
            "3|3|parked event|SQL|db/migration/V3__parked_event.sql|331458587|true",
            "4|4|parked event lane|SQL|db/migration/V4__parked_event_lane.sql|1308621896|true",
            "5|5|parked event address|SQL|db/migration/V5__parked_event_address.sql|-963736934|true",
            "6|6|durable queue|SQL|db/migration/V6__durable_queue.sql|2069406340|true",
            "7|7|backfill|SQL|db/migration/V7__backfill.sql|-798378895|true",
            // from here on, files Flyway never ran here: their rows as walhook writes them, by Flyway's checksum
            "8|8|activation|SQL|db/migration/V8__activation.sql|-1501265565|true",
            "9|9|activation token|SQL|db/migration/V9__activation_token.sql|-1808646152|true",
            "10|10|parked event address parts|SQL|db/migration/V10__parked_event_address_parts.sql|-1805309967|true",
            "11|11|activation released|SQL|db/migration/V11__activation_released.sql|663736808|true",
            "12|12|subscription matched before|SQL|db/migration/V12__subscription_matched_before.sql|-1874845366|true",
            "13|13|dropped event|SQL|db/migration/V13__dropped_event.sql|-1248673008|true",
            "14|14|checkpoint timeline|SQL|db/migration/V14__checkpoint_timeline.sql|-1678512213|true",
            "15|15|queue run|SQL|db/migration/V15__queue_run.sql|2005555190|true",
            "16|16|gone endpoint|SQL|db/migration/V16__gone_endpoint.sql|1364916993|true",
            "17|17|backfill id key|SQL|db/migration/V17__backfill_id_key.sql|-901254334|true",
            "18|18|backfill moved|SQL|db/migration/V18__backfill_moved.sql|-1098151758|true");

    private static PGSimpleDataSource database(String prefix) throws SQLException {
        PostgresServer server = TestPostgres.shared();
        String database = server.createDatabase(prefix);
        PGSimpleDataSource dataSource = new PGSimpleDataSource();
        dataSource.setUrl(server.jdbcUrl(database));
        dataSource.setUser(server.user());
        dataSource.setPassword(server.password());
        return dataSource;
    }

    private static List<String> history(PGSimpleDataSource dataSource, String schema) throws SQLException {
        List<String> rows = new ArrayList<>();
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
                ResultSet r = s.executeQuery("SELECT installed_rank, version, description, type, script, checksum, success"
                        + " FROM " + schema + ".flyway_schema_history ORDER BY installed_rank")) {
            while (r.next()) {
                rows.add(r.getInt(1) + "|" + r.getString(2) + "|" + r.getString(3) + "|" + r.getString(4) + "|"
                        + r.getString(5) + "|" + r.getObject(6) + "|" + r.getBoolean(7));
            }
        }
        return rows;
    }

    private static void sql(PGSimpleDataSource dataSource, String statement) throws SQLException {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement()) {
            s.execute(statement);
        }
    }

    @Test
    void everyFileInTheMigrationFolderIsListedInOrder() throws Exception {
        try (Stream<Path> files = Files.list(Path.of("src/main/resources/db/migration"))) {
            List<String> names = files.map(f -> f.getFileName().toString()).sorted(
                    java.util.Comparator.comparingInt(n -> Integer.parseInt(n.substring(1, n.indexOf("__"))))).toList();
            assertThat(SchemaMigrations.FILES).containsExactlyElementsOf(names);
        }
    }

    /** The stream asks whether a schema holds state at any of its tables: a table a migration adds is one of them. */
    @Test
    void everyTableAMigrationCreatesIsAmongTheStateTableNames() throws Exception {
        java.util.Set<String> created = new java.util.TreeSet<>(List.of(SchemaMigrations.HISTORY));
        java.util.regex.Pattern create = java.util.regex.Pattern.compile("CREATE TABLE \\$\\{flyway:defaultSchema}\\.(\\w+)");
        try (Stream<Path> files = Files.list(Path.of("src/main/resources/db/migration"))) {
            for (Path file : files.toList()) {
                java.util.regex.Matcher m = create.matcher(Files.readString(file));
                while (m.find()) {
                    created.add(m.group(1));
                }
            }
        }
        assertThat(created).hasSizeGreaterThan(7);
        assertThat(SchemaMigrations.TABLE_NAMES).containsExactlyInAnyOrderElementsOf(created)
                .containsAll(SchemaMigrations.STATE_TABLES);
    }

    @Test
    void aFreshDatabaseIsMigratedAndRecordedAsFlywayRecordsIt() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_fresh");
        assertThat(SchemaMigrations.migrate(dataSource, "walhook")).isEqualTo(SchemaMigrations.FILES.size());
        assertThat(history(dataSource, "walhook")).containsExactlyElementsOf(FLYWAY_ROWS);
        sql(dataSource, "SELECT slot_name, end_lsn FROM walhook.checkpoint");
        sql(dataSource, "SELECT id, subscription_id, ordering, row_key FROM walhook.parked_event");
        assertThat(SchemaMigrations.migrate(dataSource, "walhook")).as("again: nothing to do").isZero();
        assertThat(history(dataSource, "walhook")).hasSize(FLYWAY_ROWS.size());
    }

    @Test
    void aSchemaPartlyMigratedGetsOnlyWhatItLacks() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_part");
        SchemaMigrations.migrate(dataSource, "walhook");
        sql(dataSource, "DROP TABLE walhook.backfill_moved");
        sql(dataSource, "DROP TABLE walhook.backfill");
        sql(dataSource, "DROP TABLE walhook.activation");
        sql(dataSource, "ALTER TABLE walhook.parked_event DROP COLUMN address_parts");
        sql(dataSource, "DROP TABLE walhook.subscription_matched_before");
        sql(dataSource, "DROP TABLE walhook.dropped_event");
        sql(dataSource, "DROP TABLE walhook.queue_run");
        sql(dataSource, "DROP TABLE walhook.gone_endpoint");
        sql(dataSource, "ALTER TABLE walhook.checkpoint DROP COLUMN system_id, DROP COLUMN timeline, DROP COLUMN earlier_history_up_to");
        sql(dataSource, "DELETE FROM walhook.flyway_schema_history WHERE version IN ('7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18')");
        assertThat(SchemaMigrations.migrate(dataSource, "walhook")).isEqualTo(12);
        assertThat(history(dataSource, "walhook")).containsExactlyElementsOf(FLYWAY_ROWS);
        sql(dataSource, "SELECT system_id, timeline, earlier_history_up_to FROM walhook.checkpoint");
        sql(dataSource, "SELECT count(*) FROM walhook.backfill");
        sql(dataSource, "SELECT token, released FROM walhook.activation");
    }

    @Test
    void anotherSchemaNameIsMigratedUnderIt() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_named");
        SchemaMigrations.migrate(dataSource, "cdc_state");
        sql(dataSource, "SELECT count(*) FROM cdc_state.checkpoint");
        assertThat(history(dataSource, "cdc_state").get(0)).contains("\"cdc_state\"");
    }

    @Test
    void aRecordedMigrationWhoseFileChangedStopsNamingIt() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_edited");
        SchemaMigrations.migrate(dataSource, "walhook");
        sql(dataSource, "UPDATE walhook.flyway_schema_history SET checksum = 1 WHERE version = '2'");
        assertThatThrownBy(() -> SchemaMigrations.migrate(dataSource, "walhook")).isInstanceOf(SQLException.class)
                .hasMessageContaining("V2__subscription.sql").hasMessageContaining("checksum 1");
    }

    @Test
    void aFailedMigrationStopsNamingIt() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_failed");
        SchemaMigrations.migrate(dataSource, "walhook");
        sql(dataSource, "UPDATE walhook.flyway_schema_history SET success = false WHERE version = '7'");
        assertThatThrownBy(() -> SchemaMigrations.migrate(dataSource, "walhook")).isInstanceOf(SQLException.class)
                .hasMessageContaining("V7__backfill.sql of schema walhook failed earlier");
    }

    @Test
    void aSchemaANewerWalhookMigratedIsLeftAlone() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_newer");
        SchemaMigrations.migrate(dataSource, "walhook");
        sql(dataSource, "INSERT INTO walhook.flyway_schema_history (installed_rank, version, description, type, script,"
                + " checksum, installed_by, execution_time, success) VALUES (19, '19', 'later', 'SQL',"
                + " 'db/migration/V19__later.sql', 5, current_user, 1, true)");
        assertThat(SchemaMigrations.migrate(dataSource, "walhook")).isZero();
    }

    @Test
    void aFailingMigrationLeavesNeitherItsChangesNorItsRecord() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_rollback");
        SchemaMigrations.migrate(dataSource, "walhook");
        sql(dataSource, "DROP TABLE walhook.backfill_moved");
        sql(dataSource, "DROP TABLE walhook.backfill");
        sql(dataSource, "DROP TABLE walhook.activation");
        sql(dataSource, "ALTER TABLE walhook.parked_event DROP COLUMN address_parts");
        sql(dataSource, "DROP TABLE walhook.subscription_matched_before");
        sql(dataSource, "DROP TABLE walhook.dropped_event");
        sql(dataSource, "DROP TABLE walhook.queue_run");
        sql(dataSource, "DROP TABLE walhook.gone_endpoint");
        sql(dataSource, "ALTER TABLE walhook.checkpoint DROP COLUMN system_id, DROP COLUMN timeline, DROP COLUMN earlier_history_up_to");
        sql(dataSource, "DELETE FROM walhook.flyway_schema_history WHERE version IN ('7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18')");
        // V7's last statement creates the index backfill_initial: a table of that name makes it fail
        sql(dataSource, "CREATE TABLE walhook.backfill_initial ()");
        assertThatThrownBy(() -> SchemaMigrations.migrate(dataSource, "walhook")).isInstanceOf(SQLException.class)
                .hasMessageContaining("backfill_initial");
        assertThat(exists(dataSource, "walhook.backfill")).as("the file's first statements are undone too").isFalse();
        assertThat(history(dataSource, "walhook")).as("nor those after it").hasSize(FLYWAY_ROWS.size() - 12);
        assertThat(exists(dataSource, "walhook.activation")).isFalse();
        sql(dataSource, "DROP TABLE walhook.backfill_initial");
        assertThat(SchemaMigrations.migrate(dataSource, "walhook")).as("and it runs whole the next time").isEqualTo(12);
    }

    private static boolean exists(PGSimpleDataSource dataSource, String relation) throws SQLException {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
                ResultSet r = s.executeQuery("SELECT to_regclass('" + relation + "') IS NOT NULL")) {
            r.next();
            return r.getBoolean(1);
        }
    }

    @Test
    void aSchemaADbaCreatedForARoleThatCannotCreateSchemasIsMigrated() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_precreated");
        String role = "limited_" + Long.toHexString(System.nanoTime());
        sql(dataSource, "CREATE ROLE " + role + " LOGIN");
        sql(dataSource, "CREATE SCHEMA walhook AUTHORIZATION " + role);
        PGSimpleDataSource limited = new PGSimpleDataSource();
        limited.setUrl(dataSource.getUrl());
        limited.setUser(role);
        assertThat(SchemaMigrations.migrate(limited, "walhook")).isEqualTo(SchemaMigrations.FILES.size());
        assertThat(history(dataSource, "walhook")).as("no row for a schema walhook did not create")
                .containsExactlyElementsOf(FLYWAY_ROWS.subList(1, FLYWAY_ROWS.size()));
    }

    @Test
    void aSchemaThatHoldsTablesButNoHistoryIsNotWalhooksAndIsRefused() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_foreign");
        sql(dataSource, "CREATE SCHEMA app");
        sql(dataSource, "CREATE TABLE app.orders (id int)");
        assertThatThrownBy(() -> SchemaMigrations.migrate(dataSource, "app")).isInstanceOf(SQLException.class)
                .hasMessageContaining("schema app holds tables but no flyway_schema_history");
        assertThat(exists(dataSource, "app.checkpoint")).isFalse();
    }

    /**
     * A migration that fails gives its connection back to the pool, without the schema's lock.
     * Before, the connection was aborted, and Agroal 3.0.1 never gives an aborted connection's place
     * back: start-up retries a migration the database broke off for up to a minute, and each try
     * took one of the pool's 4 places for good.
     */
    @Test
    void aFailedMigrationGivesItsPooledConnectionBackWithoutTheLock() throws Exception {
        PGSimpleDataSource plain = database("migrate_pooled");
        sql(plain, "CREATE SCHEMA app");
        sql(plain, "CREATE TABLE app.orders (id int)");
        try (io.agroal.api.AgroalDataSource pool = io.agroal.api.AgroalDataSource.from(
                new io.agroal.api.configuration.supplier.AgroalDataSourceConfigurationSupplier()
                        .connectionPoolConfiguration(p -> p.maxSize(2).acquisitionTimeout(java.time.Duration.ofSeconds(3))
                                .connectionFactoryConfiguration(f -> f.jdbcUrl(plain.getUrl())
                                        .principal(new io.agroal.api.security.NamePrincipal(plain.getUser()))
                                        .credential(new io.agroal.api.security.SimplePassword(plain.getPassword())))))) {
            for (int attempt = 1; attempt <= 3; attempt++) {
                assertThatThrownBy(() -> SchemaMigrations.migrate(pool, "app")).isInstanceOf(SQLException.class)
                        .hasMessageContaining("holds tables but no flyway_schema_history");
            }
            try (Connection c = pool.getConnection(); Connection other = plain.getConnection();
                    Statement s = other.createStatement();
                    ResultSet r = s.executeQuery("SELECT pg_try_advisory_lock(" + SchemaMigrations.lockKey("app") + ")")) {
                assertThat(c.isValid(5)).isTrue();
                r.next();
                assertThat(r.getBoolean(1)).as("the schema's lock is free").isTrue();
            }
        }
    }

    /**
     * Another deployment's state is told by its history recording walhook's first migration, not by
     * its tables' names: an application's own Flyway schema with tables called subscription,
     * checkpoint and parked_event is not walhook's, and its changes are never skipped for it.
     */
    @Test
    void aSchemaHoldsWalhooksStateWhenItsHistoryRecordsWalhooksFirstMigration() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_verdict");
        SchemaMigrations.migrate(dataSource, "walhook_other");
        sql(dataSource, "CREATE SCHEMA app");
        sql(dataSource, "CREATE TABLE app.flyway_schema_history (installed_rank int PRIMARY KEY, version varchar(50),"
                + " checksum int)");
        sql(dataSource, "INSERT INTO app.flyway_schema_history VALUES (1, '1', 12345)");
        for (String table : List.of("checkpoint", "subscription", "parked_event", "activation")) {
            sql(dataSource, "CREATE TABLE app." + table + " (id int)");
        }
        sql(dataSource, "CREATE SCHEMA plain");
        sql(dataSource, "CREATE TABLE plain.subscription (id int)");
        // a table of the history's name that is no history: not a reason to stop the stream
        sql(dataSource, "CREATE SCHEMA odd");
        sql(dataSource, "CREATE TABLE odd.flyway_schema_history (note text)");
        // a deployment whose history this role may not read: told by its tables
        sql(dataSource, "CREATE ROLE verdict_reader LOGIN PASSWORD 'r'");
        sql(dataSource, "REVOKE ALL ON SCHEMA walhook_other FROM PUBLIC");
        try (Connection c = dataSource.getConnection()) {
            assertThat(SchemaMigrations.stateVerdict(c, "walhook_other")).isEqualTo(SchemaMigrations.StateVerdict.STATE);
            assertThat(SchemaMigrations.stateVerdict(c, "app")).isEqualTo(SchemaMigrations.StateVerdict.UNSURE);
            assertThat(SchemaMigrations.stateVerdict(c, "plain")).isEqualTo(SchemaMigrations.StateVerdict.NONE);
            assertThat(SchemaMigrations.stateVerdict(c, "odd")).isEqualTo(SchemaMigrations.StateVerdict.UNSURE);
            assertThat(SchemaMigrations.stateVerdict(c, "Odd\"Name")).isEqualTo(SchemaMigrations.StateVerdict.NONE);
        }
        try (Connection c = java.sql.DriverManager.getConnection(dataSource.getUrl(), "verdict_reader", "r")) {
            assertThat(SchemaMigrations.stateVerdict(c, "walhook_other")).isEqualTo(SchemaMigrations.StateVerdict.STATE);
        } finally {
            sql(dataSource, "DROP OWNED BY verdict_reader");
            sql(dataSource, "DROP ROLE verdict_reader");
        }
    }

    @Test
    void aBaselinedSchemaIsTakenAsMigratedUpToItsBaseline() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_baseline");
        SchemaMigrations.migrate(dataSource, "walhook");
        sql(dataSource, "DELETE FROM walhook.flyway_schema_history WHERE version::int <= 6");
        sql(dataSource, "INSERT INTO walhook.flyway_schema_history (installed_rank, version, description, type, script,"
                + " checksum, installed_by, execution_time, success) VALUES (1, '6', '<< Flyway Baseline >>', 'BASELINE',"
                + " '<< Flyway Baseline >>', NULL, current_user, 0, true)");
        assertThat(SchemaMigrations.migrate(dataSource, "walhook")).isZero();
    }

    @Test
    void aVersionWalhookNeverWritesIsNamed() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_dotted");
        SchemaMigrations.migrate(dataSource, "walhook");
        sql(dataSource, "INSERT INTO walhook.flyway_schema_history (installed_rank, version, description, type, script,"
                + " checksum, installed_by, execution_time, success) VALUES (19, '7.1', 'hotfix', 'SQL',"
                + " 'V7_1__hotfix.sql', 5, current_user, 1, true)");
        assertThatThrownBy(() -> SchemaMigrations.migrate(dataSource, "walhook")).isInstanceOf(SQLException.class)
                .hasMessageContaining("version '7.1' (V7_1__hotfix.sql)");
    }

    @Test
    void theLockIsFlywaysForTheSameHistoryTable() {
        // Flyway's PostgreSQLAdvisoryLockTemplate: 77431708279161 + the table's quoted name's hash
        assertThat(SchemaMigrations.lockKey("walhook")).isEqualTo(77431708279161L + "\"walhook\".\"flyway_schema_history\"".hashCode());
    }

    @Test
    void instancesStartingTogetherMigrateOnce() throws Exception {
        PGSimpleDataSource dataSource = database("migrate_race");
        CyclicBarrier start = new CyclicBarrier(3);
        List<CompletableFuture<Integer>> runs = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            runs.add(CompletableFuture.supplyAsync(() -> {
                try {
                    start.await();
                    return SchemaMigrations.migrate(dataSource, "walhook");
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }));
        }
        int applied = 0;
        for (CompletableFuture<Integer> run : runs) {
            applied += run.get();
        }
        assertThat(applied).as("each migration applied by one of them").isEqualTo(SchemaMigrations.FILES.size());
        assertThat(history(dataSource, "walhook")).containsExactlyElementsOf(FLYWAY_ROWS);
    }

    @Test
    void theChecksumIsFlywaysOverLinesWithoutTheirBreaks() {
        assertThat(SchemaMigrations.checksum("a\nb")).isEqualTo(SchemaMigrations.checksum("a\r\nb\n"))
                .isEqualTo(SchemaMigrations.checksum("a\rb"));
        java.util.zip.CRC32 ab = new java.util.zip.CRC32();
        ab.update("ab".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        assertThat(SchemaMigrations.checksum("a\nb")).as("the lines' bytes, one after the other").isEqualTo((int) ab.getValue());
        assertThat(SchemaMigrations.checksum("\uFEFFa\nb")).as("a byte order mark does not count")
                .isEqualTo(SchemaMigrations.checksum("a\nb"));
        assertThat(SchemaMigrations.checksum("a\nb")).isNotEqualTo(SchemaMigrations.checksum("a b"));
    }

    /**
     * A restart finds its schema migrated already: reading the history is all it does, and a
     * connection a failover left half-open while it read gives up within the connection's limit
     * (start-up tries again) rather than wait forever, walhook alive and never ready. Here the read
     * waits for a lock when the server goes away, and its session stays there meanwhile.
     */
    @Test
    void aRestartsLookAtItsMigratedSchemaGivesUpOnAConnectionLeftHalfOpen() throws Exception {
        PGSimpleDataSource direct = database("migrate_half_open");
        SchemaMigrations.migrate(direct, "walhook");
        PostgresServer server = TestPostgres.shared();
        try (TcpProxy proxy = TcpProxy.to(server.host(), server.port()); Connection locker = direct.getConnection()) {
            PGSimpleDataSource through = new PGSimpleDataSource();
            through.setUrl(direct.getUrl().replace(":" + server.port() + "/", ":" + proxy.port() + "/"));
            through.setUser(direct.getUser());
            through.setPassword(direct.getPassword());
            through.setSocketTimeout(3); // the pool's limit (SessionTimeout.LIMIT), shorter
            locker.setAutoCommit(false);
            try (Statement s = locker.createStatement()) {
                s.execute("LOCK TABLE walhook.flyway_schema_history IN ACCESS EXCLUSIVE MODE");
            }
            CompletableFuture<Integer> migrating = CompletableFuture.supplyAsync(() -> {
                try {
                    return SchemaMigrations.migrate(through, "walhook");
                } catch (SQLException e) {
                    throw new CompletionException(e);
                }
            });
            org.awaitility.Awaitility.await("the history's read waiting for the lock").atMost(java.time.Duration.ofSeconds(30))
                    .until(() -> {
                        try (Statement s = locker.createStatement(); ResultSet r = s.executeQuery("SELECT count(*) FROM"
                                + " pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%flyway_schema_history%'")) {
                            r.next();
                            return r.getInt(1) == 1;
                        }
                    });
            proxy.loseServerOfAll();
            // the lock kept: the session stays on the server (nothing but the connection's limit ends the wait)
            assertThatThrownBy(() -> migrating.get(60, TimeUnit.SECONDS)).as("given up, not waiting still")
                    .hasCauseInstanceOf(SQLException.class);
            locker.rollback();
        }
    }
}
