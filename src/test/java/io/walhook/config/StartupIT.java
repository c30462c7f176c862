package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/** The packaged jar, configured by environment variables: bad values stop it with one line. */
class StartupIT {

    private static final Duration EXIT = Duration.ofSeconds(60);

    private static List<String> linesNaming(String output, String variable) {
        return Arrays.stream(output.split("\n")).filter(l -> l.contains(variable)).toList();
    }

    private static void assertStopsNaming(Map<String, String> env, String variable, String problem) throws Exception {
        try (WalhookProcess walhook = WalhookProcess.start(env)) {
            int status = walhook.awaitExit(EXIT);
            String output = walhook.output();
            assertThat(status).as(output).isEqualTo(StartupCheck.EXIT_CONFIG);
            assertThat(linesNaming(output, variable)).as(output).hasSize(1)
                    .allSatisfy(line -> assertThat(line).contains(problem));
            assertThat(output).as("no stack trace").doesNotContain("\tat ").doesNotContain("Exception");
        }
    }

    @Test
    void missingSourceUrlStopsStartup() throws Exception {
        assertStopsNaming(Map.of(), "WALHOOK_SOURCE_URL", "is required");
    }

    @Test
    void badSlotNameStopsStartup() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        assertStopsNaming(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(pg.defaultDatabase()), "WALHOOK_SLOT", "Orders-Slot"),
                "WALHOOK_SLOT", "'Orders-Slot' is not a replication slot name");
    }

    @Test
    void badPublicationTablesStopStartup() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        assertStopsNaming(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(pg.defaultDatabase()),
                "WALHOOK_PUBLICATION_TABLES", "public.orders,customers"),
                "WALHOOK_PUBLICATION_TABLES", "'customers'");
    }

    /** A mistyped variable was ignored: the subscription it was meant to narrow went out with every table. */
    @Test
    void aMistypedVariableStopsStartupNamingIt() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        assertStopsNaming(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(pg.defaultDatabase()),
                "WALHOOK_SUBSCRIPTIONS_ORDERS_URL", "https://hooks.example.com/orders",
                "WALHOOK_SUBSCRIPTIONS_ORDERS_TABLE", "public.orders"),
                "WALHOOK_SUBSCRIPTIONS_ORDERS_TABLE", "is not a walhook setting (did you mean WALHOOK_SUBSCRIPTIONS_ORDERS_TABLES?)");
    }

    /**
     * Quarkus reads walhook's settings from a {@code .env} file in the working directory and from
     * system properties too: a mistyped name in {@code .env} was ignored, and the subscription it
     * was meant for went out with every table. (A system property naming no setting was refused
     * already, by Quarkus's mapping.)
     */
    @Test
    void aMistypedNameInDotEnvOrASystemPropertyStopsStartupNamingIt(@org.junit.jupiter.api.io.TempDir java.nio.file.Path directory)
            throws Exception {
        PostgresServer pg = TestPostgres.shared();
        java.nio.file.Files.writeString(directory.resolve(".env"), "# the orders hook\n"
                + "WALHOOK_SUBSCRIPTIONS_ORDERS_URL=https://hooks.example.com/orders\n"
                + "WALHOOK_SUBSCRIPTIONS_ORDERS_TABLE=public.orders\n");
        try (WalhookProcess walhook = WalhookProcess.startIn(directory,
                Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(pg.defaultDatabase())))) {
            int status = walhook.awaitExit(EXIT);
            String output = walhook.output();
            assertThat(status).as(output).isEqualTo(StartupCheck.EXIT_CONFIG);
            assertThat(linesNaming(output, "WALHOOK_SUBSCRIPTIONS_ORDERS_TABLE (in .env)")).as(output).singleElement()
                    .asString().contains("is not a walhook setting (did you mean WALHOOK_SUBSCRIPTIONS_ORDERS_TABLES?)");
        }
        if (Boolean.getBoolean("walhook.it.native")) {
            return; // the harness gives the native executable no -D option
        }
        try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(pg.defaultDatabase())),
                "256m", List.of("-Dwalhook.subscriptions.orders.url=https://hooks.example.com/orders",
                        "-Dwalhook.subscriptions.orders.filters=new.id == 1"))) {
            int status = walhook.awaitExit(EXIT);
            String output = walhook.output();
            assertThat(status).as(output).isEqualTo(StartupCheck.EXIT_CONFIG);
            // Quarkus's own mapping refuses a walhook.* property it cannot place, before walhook's check
            assertThat(linesNaming(output, "walhook.subscriptions.orders.filters")).as(output)
                    .singleElement().asString().contains("walhook cannot start: walhook.subscriptions.orders.filters in"
                            + " SysPropConfigSource does not map to any root");
        }
    }

    @Test
    void badDurationStopsStartupNamingItsVariable() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        assertStopsNaming(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(pg.defaultDatabase()),
                "WALHOOK_DELIVERY_REQUEST_TIMEOUT", "5x"),
                "WALHOOK_DELIVERY_REQUEST_TIMEOUT", "is '5x', not a duration");
    }

    @Test
    void everyValueQuarkusCannotMapIsOneLogLineNamingItsVariable() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(pg.defaultDatabase()),
                "WALHOOK_DELIVERY_CONCURRENCY", "four", "WALHOOK_SOURCE_STATUS_INTERVAL", "2h", "QUARKUS_HTTP_PORT", "http");
        try (WalhookProcess walhook = WalhookProcess.start(env)) {
            int status = walhook.awaitExit(EXIT);
            String output = walhook.output();
            assertThat(status).as(output).isEqualTo(StartupCheck.EXIT_CONFIG);
            assertThat(linesNaming(output, "WALHOOK_DELIVERY_CONCURRENCY")).as(output).singleElement().asString()
                    .contains(" ERROR [io.walhook.config.StartupCheck] ")
                    .endsWith("walhook cannot start: WALHOOK_DELIVERY_CONCURRENCY is 'four', not a whole number");
            assertThat(linesNaming(output, "WALHOOK_SOURCE_STATUS_INTERVAL")).as(output).singleElement().asString()
                    .endsWith("WALHOOK_SOURCE_STATUS_INTERVAL is 2h; it must be at most 1h");
            assertThat(linesNaming(output, "QUARKUS_HTTP_PORT")).as(output).singleElement().asString()
                    .contains("QUARKUS_HTTP_PORT is 'http': ");
            assertThat(output).as("no stack trace, no SmallRye code").doesNotContain("\tat ").doesNotContain("Exception")
                    .doesNotContain("SRCFG");
        }
    }

    @Test
    void aFlagThatIsNeitherTrueNorFalseStopsStartupRatherThanMeaningFalse() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        assertStopsNaming(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(pg.defaultDatabase()),
                "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "enabled"),
                "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "it must be true or false");
    }

    /**
     * A source database named by a host name holding '_' (a Docker Compose service's, RFC 3986
     * allows it) is reached: walhook refused the URL, java.net.URI reading its authority as no host.
     */
    @Test
    void aSourceHostNameHoldingAnUnderscoreIsReached() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(WalhookProcess.ownResolverPossible(),
                "walhook needs a mount namespace of its own (root) to be given an /etc/hosts naming postgres_db");
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("underscored_host");
        pg.execute(database, "CREATE TABLE pings (id int PRIMARY KEY)");
        java.nio.file.Path hosts = java.nio.file.Files.createTempFile("hosts", "");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            java.nio.file.Files.writeString(hosts, "127.0.0.1 localhost\n::1 localhost\n127.0.0.1 postgres_db\n");
            String url = pg.sourceUrl(database).replace("@" + pg.host() + ":", "@postgres_db:");
            assertThat(url).contains("@postgres_db:");
            try (WalhookProcess walhook = WalhookProcess.startWithHosts(hosts, Map.of("WALHOOK_SOURCE_URL", url,
                    "WALHOOK_SLOT", database, "WALHOOK_SUBSCRIPTIONS_PINGS_URL", receiver.url("/pings")))) {
                walhook.awaitReady(Duration.ofSeconds(60));
                pg.execute(database, "INSERT INTO pings VALUES (1)");
                await().atMost(Duration.ofSeconds(60)).until(() -> receiver.requests("/pings").size() == 1);
            }
        } finally {
            java.nio.file.Files.deleteIfExists(hosts);
        }
    }

    @Test
    void aSlotOfAnotherDatabaseStopsStartupNamingTheSlot() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String other = pg.createDatabase("slotowner");
        String mine = pg.createDatabase("slotborrower");
        String slot = "borrowed_" + ProcessHandle.current().pid();
        try (Connection c = pg.connect(other); Statement s = c.createStatement()) {
            s.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
        }
        try {
            assertStopsNaming(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(mine), "WALHOOK_SLOT", slot),
                    "WALHOOK_SLOT", "belongs to database " + other);
        } finally {
            try (Connection c = pg.connect(other); Statement s = c.createStatement()) {
                s.execute("SELECT pg_drop_replication_slot('" + slot + "')");
            }
        }
    }

    @Test
    void unreachableDatabaseStopsStartupNamingTheUrl() throws Exception {
        assertStopsNaming(Map.of("WALHOOK_SOURCE_URL", "postgresql://app:secret@127.0.0.1:1/app"),
                "WALHOOK_SOURCE_URL", "127.0.0.1:1");
    }

    @Test
    void startsAndBecomesReadyFromTheSourceUrlAlone() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("startup");
        try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                "WALHOOK_SLOT", database))) {
            walhook.awaitReady(Duration.ofSeconds(60));
            // no WALHOOK_API_TOKEN: the API, reads included, answers 401 saying how to set one
            for (String path : List.of("/status", "/subscriptions")) {
                java.net.http.HttpResponse<String> response = java.net.http.HttpClient.newHttpClient().send(
                        java.net.http.HttpRequest.newBuilder(walhook.uri(path)).header("Authorization", "Bearer guess").build(),
                        java.net.http.HttpResponse.BodyHandlers.ofString());
                assertThat(response.statusCode()).as(path + ": " + response.body()).isEqualTo(401);
                assertThat(response.headers().firstValue("Content-Type")).hasValueSatisfying(
                        type -> assertThat(type).startsWith("application/problem+json"));
                assertThat(response.body()).contains("Set WALHOOK_API_TOKEN");
            }
            // a request target the JDK cannot even send gets a problem naming it, not Quarkus's bare 400
            try (java.net.Socket socket = new java.net.Socket("127.0.0.1", walhook.httpPort())) {
                socket.getOutputStream().write(("GET /subscriptions/%zz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        + "Connection: close\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
                String response = new String(socket.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
                assertThat(response).startsWith("HTTP/1.1 400").containsIgnoringCase("content-type: application/problem+json")
                        .contains("/subscriptions/%zz is not percent-encoded correctly");
            }
            assertThat(walhook.output()).contains("walhook ready: source postgresql://postgres@127.0.0.1:" + pg.port()
                    + "/" + database).doesNotContain(":" + pg.password() + "@");
        }
    }

    /**
     * A table pattern matches names exactly, as PostgreSQL's quoted names do: {@code public.Orders}
     * is not {@code public.orders}, and a subscription meant for that table got nothing, with no word
     * of it. Each pattern that matches no table of the publication is now a warning at start, naming
     * the subscription, and the tables it would match but for the case.
     */
    @Test
    void aTablePatternThatMatchesNoTableIsAWarningNamingTheTablesOfAnotherCase() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("patterns");
        pg.execute(database, "CREATE TABLE orders (id int PRIMARY KEY)", "CREATE TABLE order_lines (id int PRIMARY KEY)");
        try (WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                "WALHOOK_SLOT", database,
                "WALHOOK_SUBSCRIPTIONS_SALES_URL", "http://127.0.0.1:9/sales",
                "WALHOOK_SUBSCRIPTIONS_SALES_TABLES", "public.Order*,public.invoices,public.orders",
                "WALHOOK_SUBSCRIPTIONS_ALL_URL", "http://127.0.0.1:9/all"))) {
            walhook.awaitReady(Duration.ofSeconds(60));
            await().atMost(Duration.ofSeconds(30)).until(() -> walhook.output().contains("public.invoices"));
            List<String> warnings = walhook.output().lines().filter(l -> l.contains(" WARN ") && l.contains("matches no table"))
                    .toList();
            assertThat(warnings).as(walhook.output()).hasSize(2);
            assertThat(warnings).anySatisfy(w -> assertThat(w).contains("subscription sales").contains("public.Order*")
                    .contains("public.order_lines, public.orders"));
            assertThat(warnings).anySatisfy(w -> assertThat(w).contains("subscription sales").contains("public.invoices")
                    .doesNotContain("did you mean"));
        }
    }

    /**
     * Streaming starts once the HTTP server listens: a walhook whose port is taken stops before it
     * reads the slot, so it delivers none of the backlog and acknowledges nothing; the next start
     * delivers all of it.
     */
    @Test
    void aStartUpThatCannotListenDeliversNothingOfTheBacklog() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("listen");
        pg.execute(database, "CREATE TABLE orders (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                    "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"), "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true");
            try (WalhookProcess first = WalhookProcess.start(env)) { // creates the slot and publication
                first.awaitReady(EXIT);
            }
            pg.execute(database, "INSERT INTO orders SELECT g FROM generate_series(1, 200) g");
            String confirmed = confirmedFlush(pg, database);

            try (ServerSocket taken = new ServerSocket(0, 50, InetAddress.getByName("0.0.0.0"))) {
                Map<String, String> onTakenPort = new HashMap<>(env);
                onTakenPort.put("QUARKUS_HTTP_PORT", Integer.toString(taken.getLocalPort()));
                try (WalhookProcess blocked = WalhookProcess.start(onTakenPort)) {
                    int status = blocked.awaitExit(EXIT);
                    assertThat(status).as(blocked.output()).isNotZero();
                    assertThat(blocked.output()).contains("walhook cannot start: port " + taken.getLocalPort())
                            .contains("is in use by another process").contains("choose another (QUARKUS_HTTP_PORT")
                            .doesNotContain("streaming slot");
                }
            }
            assertThat(receiver.requests("/all")).isEmpty();
            assertThat(confirmedFlush(pg, database)).isEqualTo(confirmed);

            try (WalhookProcess second = WalhookProcess.start(env)) {
                second.awaitReady(EXIT);
                await().atMost(EXIT).until(() -> receiver.requests("/all").size() == 200);
            }
        }
    }

    private static String confirmedFlush(PostgresServer pg, String slot) throws Exception {
        try (Connection c = pg.connect(slot); Statement s = c.createStatement();
                ResultSet r = s.executeQuery("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '"
                        + slot + "'")) {
            assertThat(r.next()).isTrue();
            return r.getString(1);
        }
    }

    @Test
    void walLevelOtherThanLogicalStopsStartupWithTheFix() throws Exception {
        EmbeddedPostgres replica = EmbeddedPostgres.builder().setting("wal_level", "replica").start();
        try {
            assertStopsNaming(Map.of("WALHOOK_SOURCE_URL", replica.sourceUrl("postgres")), "WALHOOK_SOURCE_URL",
                    "wal_level = replica; walhook needs logical: run ALTER SYSTEM SET wal_level = logical;");
        } finally {
            replica.stop();
        }
    }

    @Test
    void roleWithoutReplicationStopsStartupWithTheFix() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("norepl");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE ROLE plain_" + database + " LOGIN PASSWORD 'pw'");
            s.execute("GRANT CREATE ON DATABASE " + database + " TO plain_" + database);
        }
        String url = "postgresql://plain_" + database + ":pw@127.0.0.1:" + pg.port() + "/" + database;
        assertStopsNaming(Map.of("WALHOOK_SOURCE_URL", url), "WALHOOK_SOURCE_URL",
                "may not replicate: run ALTER ROLE \"plain_" + database + "\" REPLICATION;");
    }
}
