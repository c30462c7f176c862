package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.walhook.testing.ApiClient;
import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * A password or token is used as it was set: {@code ${...}} and {@code $$} in it are characters,
 * not references to other settings (which SmallRye expanded, emptying what it could not resolve).
 * The server asks every role but its own for a password, so a changed password cannot connect.
 */
class SettingsAsWrittenIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final String PASSWORD = "p$${HOME}w${walhook.slot}o$$rd$";
    private static final String TOKEN = "t$${HOME}o${no.such.setting}k$$en";

    @Test
    void passwordsAndTokensHoldingDollarsAndBracesAreUsedAsWritten() throws Exception {
        Path dir = Files.createTempDirectory("walhook-hba-", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx--x--x")));
        Path hba = dir.resolve("pg_hba.conf");
        Files.writeString(hba, String.join("\n",
                "local all all trust",
                "host all postgres 127.0.0.1/32 trust",
                "host replication postgres 127.0.0.1/32 trust",
                "host all all 127.0.0.1/32 scram-sha-256",
                "host replication all 127.0.0.1/32 scram-sha-256", ""));
        Files.setPosixFilePermissions(hba, PosixFilePermissions.fromString("rw-r--r--"));
        EmbeddedPostgres pg = EmbeddedPostgres.builder().major(TestPostgres.defaultMajor())
                .setting("hba_file", hba.toString()).start();
        try {
            String database = pg.createDatabase("dollars");
            pg.execute(database, "CREATE ROLE dollars LOGIN SUPERUSER PASSWORD '" + PASSWORD + "'",
                    "CREATE TABLE items (id int PRIMARY KEY, n int)");
            try (WebhookReceiver receiver = WebhookReceiver.start();
                    WalhookProcess walhook = WalhookProcess.start(Map.of(
                            "WALHOOK_SOURCE_URL", "postgresql://dollars@127.0.0.1:" + pg.port() + "/" + database,
                            "WALHOOK_SOURCE_PASSWORD", PASSWORD,
                            "WALHOOK_SLOT", database,
                            "WALHOOK_API_TOKEN", TOKEN,
                            "WALHOOK_SUBSCRIPTIONS_ITEMS_URL", receiver.url("/items"),
                            "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"))) {
                walhook.awaitReady(WAIT);
                pg.execute(database, "INSERT INTO items VALUES (1, 1)");
                await().atMost(WAIT).until(() -> receiver.requests("/items").size() == 1);
                ApiClient.Answer status = new ApiClient(walhook, TOKEN).get("/status");
                assertThat(status.status()).as(status.text()).isEqualTo(200);
                // what SmallRye made of the token is no token
                assertThat(new ApiClient(walhook, "t${HOME}ok$en").get("/status").status()).isEqualTo(401);
                assertThat(walhook.output()).doesNotContain(PASSWORD).doesNotContain(TOKEN);
            }
        } finally {
            pg.stop();
        }
    }
}
