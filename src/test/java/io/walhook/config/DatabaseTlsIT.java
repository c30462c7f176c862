package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import io.walhook.testing.ApiClient;
import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.HarnessException;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * The source database reached over TLS only, as in production: the server refuses every
 * connection without TLS, and its certificate is signed by a CA of the test's own. With
 * {@code sslmode=verify-full} and that CA as {@code sslrootcert}, every one of walhook's sessions
 * (the stream, its pools, its lock, its listener, {@code /status}'s) must connect, over TLS,
 * verifying the server; with another CA, walhook must not start, saying why.
 */
class DatabaseTlsIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final String TOKEN = "tls-test-token";
    private static final String CERT_ROLE = "walhook_cert";
    private static Path certificates;
    private static EmbeddedPostgres pg;

    @BeforeAll
    static void startServerWithTlsOnly() throws Exception {
        certificates = Files.createTempDirectory("walhook-tls-");
        Files.setPosixFilePermissions(certificates, Set.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE,
                PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.OTHERS_EXECUTE));
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=walhook test CA",
                "-keyout", "ca.key", "-out", "ca.crt");
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=another CA",
                "-keyout", "other.key", "-out", "other.crt");
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
                "-out", "server.csr");
        Files.writeString(certificates.resolve("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
                "-extfile", "san.ext", "-out", "server.crt");
        // a client certificate, signed by the same CA, for a role the server admits by certificate only; its key
        // as PEM and as pgjdbc's traditional DER PKCS #8
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + CERT_ROLE, "-keyout", "client.key",
                "-out", "client.csr");
        openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
                "-out", "client.crt");
        openssl("pkcs8", "-topk8", "-nocrypt", "-in", "client.key", "-outform", "DER", "-out", "client.pk8");
        for (String key : List.of("client.key", "client.pk8")) {
            Files.setPosixFilePermissions(certificates.resolve(key), Set.of(PosixFilePermission.OWNER_READ));
        }
        Files.writeString(certificates.resolve("pg_hba.conf"), String.join("\n",
                "local all all trust",
                "hostnossl all all 0.0.0.0/0 reject",
                "hostssl all " + CERT_ROLE + " 127.0.0.1/32 cert",
                "hostssl all all 127.0.0.1/32 trust",
                "hostssl replication all 127.0.0.1/32 trust", ""));
        for (String file : List.of("server.crt", "server.key", "pg_hba.conf", "ca.crt", "other.crt")) {
            Path path = certificates.resolve(file);
            Files.setPosixFilePermissions(path, file.endsWith(".key") ? Set.of(PosixFilePermission.OWNER_READ)
                    : Set.of(PosixFilePermission.OWNER_READ, PosixFilePermission.GROUP_READ, PosixFilePermission.OTHERS_READ));
            if (new com.sun.security.auth.module.UnixSystem().getUid() == 0 && !file.startsWith("ca") && !file.startsWith("other")) {
                // the server runs as nobody when the tests run as root, and reads its key only if it owns it
                Files.setOwner(path, path.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName("nobody"));
            }
        }
        pg = EmbeddedPostgres.builder().major(TestPostgres.defaultMajor())
                .setting("ssl", "on")
                .setting("ssl_cert_file", certificates.resolve("server.crt").toString())
                .setting("ssl_key_file", certificates.resolve("server.key").toString())
                .setting("ssl_ca_file", certificates.resolve("ca.crt").toString())
                .setting("hba_file", certificates.resolve("pg_hba.conf").toString())
                .start();
        pg.execute(pg.defaultDatabase(), "CREATE ROLE " + CERT_ROLE + " LOGIN REPLICATION SUPERUSER");
    }

    @AfterAll
    static void stop() throws Exception {
        if (pg != null) {
            pg.stop();
        }
    }

    private static void openssl(String... args) throws Exception {
        List<String> command = new ArrayList<>(List.of("openssl"));
        command.addAll(List.of(args));
        Process process = new ProcessBuilder(command).directory(certificates.toFile()).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes());
        if (!process.waitFor(60, TimeUnit.SECONDS) || process.exitValue() != 0) {
            throw new HarnessException("openssl " + String.join(" ", args) + " failed: " + output);
        }
    }

    private static String url(String database, String rootCertificate) {
        return pg.sourceUrl(database) + "?sslmode=verify-full&sslrootcert=" + certificates.resolve(rootCertificate);
    }

    private static Map<String, String> env(String database, String rootCertificate, String... more) {
        Map<String, String> env = new java.util.HashMap<>(Map.of("WALHOOK_SOURCE_URL", url(database, rootCertificate),
                "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", TOKEN));
        for (int i = 0; i < more.length; i += 2) {
            env.put(more[i], more[i + 1]);
        }
        return env;
    }

    @Test
    void everySessionConnectsOverVerifiedTlsAndChangesFlow() throws Exception {
        String database = pg.createDatabase("tls");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int)");
        try (WebhookReceiver receiver = WebhookReceiver.start();
                WalhookProcess walhook = WalhookProcess.start(env(database, "ca.crt",
                        "WALHOOK_SUBSCRIPTIONS_ITEMS_URL", receiver.url("/items"),
                        "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"))) {
            walhook.awaitReady(WAIT);
            pg.execute(database, "INSERT INTO items VALUES (1, 1)");
            await().atMost(WAIT).until(() -> receiver.requests("/items").size() == 1);
            ApiClient api = new ApiClient(walhook, TOKEN);
            ApiClient.Answer status = api.get("/status");
            assertThat(status.status()).as(status.text()).isEqualTo(200);
            ApiClient.Answer created = api.post("/subscriptions", "{\"name\": \"more\", \"tables\": [\"public.items\"],"
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/more") + "\"}}");
            assertThat(created.status()).as(created.text()).isEqualTo(201);
            pg.execute(database, "INSERT INTO items VALUES (2, 2)");
            await().atMost(WAIT).until(() -> receiver.requests("/more").size() == 1);
            // every session of walhook's on the database is over TLS (none other could connect at all)
            try (Connection c = pg.connect(database); Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SELECT count(*), count(*) FILTER (WHERE ssl.ssl)"
                            + " FROM pg_stat_activity a JOIN pg_stat_ssl ssl USING (pid)"
                            + " WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()")) {
                rs.next();
                assertThat(rs.getInt(1)).as("walhook's sessions").isGreaterThanOrEqualTo(3);
                assertThat(rs.getInt(2)).as("of them over TLS").isEqualTo(rs.getInt(1));
            }
        }
    }

    /**
     * No {@code sslmode} at all: libpq's and pgjdbc's default, {@code prefer}, for every session, the
     * {@code /status} pool's too (it used to connect without TLS, and against a server refusing that
     * {@code /status} answered 500).
     */
    @Test
    void withoutAnSslmodeEverySessionPrefersTls() throws Exception {
        String database = pg.createDatabase("tls_prefer");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int)");
        try (WebhookReceiver receiver = WebhookReceiver.start();
                WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                        "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", TOKEN,
                        "WALHOOK_SUBSCRIPTIONS_ITEMS_URL", receiver.url("/items")))) {
            walhook.awaitReady(WAIT);
            pg.execute(database, "INSERT INTO items VALUES (1, 1)");
            await().atMost(WAIT).until(() -> receiver.requests("/items").size() == 1);
            ApiClient.Answer status = new ApiClient(walhook, TOKEN).get("/status");
            assertThat(status.status()).as(status.text()).isEqualTo(200);
        }
    }

    @Test
    void aServerWhoseCertificateTheRootDoesNotSignIsRefusedAndSaysSo() throws Exception {
        String database = pg.createDatabase("tls_other");
        try (WalhookProcess walhook = WalhookProcess.start(env(database, "other.crt"))) {
            assertThat(walhook.awaitExit(WAIT)).isNotZero();
            // a setting, said at once: not waited for as a database that went away
            assertThat(walhook.output()).contains("walhook cannot start: WALHOOK_SOURCE_URL", "TLS", "sslrootcert")
                    .doesNotContain("trying again").doesNotContain("postgres:postgres");
        }
    }

    /**
     * A role the server admits only with a client certificate ({@code cert} in pg_hba.conf): given
     * {@code sslcert} and {@code sslkey}, every session presents the certificate, the pool behind
     * {@code /status} too (it presented none, and {@code /status} answered 503), with the key as
     * PEM or as DER (PKCS #8, pgjdbc's {@code .pk8}).
     */
    @ParameterizedTest
    @ValueSource(strings = {"client.key", "client.pk8"})
    void aClientCertificateIsPresentedByEverySession(String key) throws Exception {
        String database = pg.createDatabase("tls_cert");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int)");
        String url = "postgresql://" + CERT_ROLE + "@" + pg.host() + ":" + pg.port() + "/" + database
                + "?sslmode=verify-full&sslrootcert=" + certificates.resolve("ca.crt") + "&sslcert="
                + certificates.resolve("client.crt") + "&sslkey=" + certificates.resolve(key);
        try (WebhookReceiver receiver = WebhookReceiver.start();
                WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", url,
                        "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", TOKEN,
                        "WALHOOK_SUBSCRIPTIONS_ITEMS_URL", receiver.url("/items"),
                        "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"))) {
            walhook.awaitReady(WAIT);
            pg.execute(database, "INSERT INTO items VALUES (1, 1)");
            await().atMost(WAIT).until(() -> receiver.requests("/items").size() == 1);
            ApiClient.Answer status = new ApiClient(walhook, TOKEN).get("/status");
            assertThat(status.status()).as(status.text()).isEqualTo(200);
            try (Connection c = pg.connect(database); Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SELECT count(*), count(*) FILTER (WHERE ssl.client_dn = '/CN="
                            + CERT_ROLE + "') FROM pg_stat_activity a JOIN pg_stat_ssl ssl USING (pid)"
                            + " WHERE a.usename = '" + CERT_ROLE + "'")) {
                rs.next();
                assertThat(rs.getInt(1)).as("walhook's sessions").isGreaterThanOrEqualTo(3);
                assertThat(rs.getInt(2)).as("of them with the client certificate").isEqualTo(rs.getInt(1));
            }
        }
    }
}
