package io.walhook.api;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import jakarta.inject.Inject;
import jakarta.inject.Singleton;

import org.jboss.logging.Logger;

import io.quarkus.reactive.pg.client.PgPoolCreator;
import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.pgclient.PgBuilder;
import io.vertx.pgclient.PgConnectOptions;
import io.vertx.sqlclient.Pool;
import io.walhook.config.ConfigException;
import io.walhook.config.SessionTimeout;
import io.walhook.config.SourceUrl;
import io.walhook.config.WalhookConfig;

/**
 * The reactive pool behind {@code GET /status}, with the limit walhook's JDBC sessions have
 * ({@link SessionTimeout}): a connection that has neither read nor written for that long is closed.
 * A query on a connection a failover left half-open then fails (a 503) instead of waiting forever
 * and keeping its connection from the pool; an idle connection is opened again when next needed.
 * It presents the client certificate the JDBC sessions do ({@code sslcert} and {@code sslkey}, or
 * pgjdbc's default files), to a server that admits walhook by certificate.
 */
@Singleton
public class StatusPoolCreator implements PgPoolCreator {

    private static final Logger LOG = Logger.getLogger(StatusPoolCreator.class);
    /** How long a request waits for one of the pool's connections. */
    static final int ACQUIRE_SECONDS = 5;

    @Inject
    WalhookConfig config;

    @Override
    public Pool create(Input input) {
        List<PgConnectOptions> servers = input.pgConnectOptionsList();
        Optional<PemKeyCertOptions> clientCertificate = clientCertificate();
        for (PgConnectOptions options : servers) {
            options.setIdleTimeout((int) SessionTimeout.LIMIT.toSeconds()).setIdleTimeoutUnit(TimeUnit.SECONDS);
            clientCertificate.ifPresent(options::setPemKeyCertOptions);
        }
        // a request that finds every connection taken for 5 s is answered 503, as the API's other requests are
        var pool = PgBuilder.pool().with(input.poolOptions().setConnectionTimeout(ACQUIRE_SECONDS)
                .setConnectionTimeoutUnit(TimeUnit.SECONDS)).using(input.vertx());
        if (servers.size() == 1) {
            return pool.connectingTo(servers.get(0)).build();
        }
        AtomicInteger next = new AtomicInteger(); // in turn, as Quarkus's own pool takes them
        return pool.connectingTo(() -> Future.succeededFuture(servers.get(Math.floorMod(next.getAndIncrement(),
                servers.size())))).build();
    }

    private Optional<PemKeyCertOptions> clientCertificate() {
        SourceUrl source;
        try {
            source = SourceUrl.parse(config.source().url(), config.source().user(), config.source().password());
        } catch (ConfigException notUsable) {
            return Optional.empty(); // StartupCheck says what is wrong, and walhook does not start
        }
        Optional<String> certificate = source.clientCertificate();
        Optional<String> key = source.clientKey();
        if (source.sslMode().equals("disable") || certificate.isEmpty() || key.isEmpty()) {
            return Optional.empty();
        }
        try {
            byte[] keyBytes = Files.readAllBytes(Path.of(key.get()));
            String unusable = !Files.isReadable(Path.of(certificate.get())) ? "its certificate " + certificate.get()
                    + " cannot be read" : encrypted(keyBytes) ? "its key " + key.get() + " is encrypted" : null;
            if (unusable != null) {
                // pgjdbc reads them only when a server asks for a certificate, the Vert.x client at every connection:
                // a /status that always failed where the stream works
                LOG.warnf("GET /status connects without a client certificate: %s", unusable);
                return Optional.empty();
            }
            return Optional.of(new PemKeyCertOptions().addCertPath(certificate.get()).addKeyValue(pemKey(keyBytes)));
        } catch (IOException | RuntimeException unreadable) {
            LOG.warnf("GET /status connects without a client certificate: its key %s cannot be read (%s)", key.get(),
                    unreadable.getMessage());
            return Optional.empty();
        }
    }

    /** Whether a key is encrypted (PEM {@code ENCRYPTED}, or DER {@code EncryptedPrivateKeyInfo}), which the pool cannot read. */
    static boolean encrypted(byte[] key) {
        String text = new String(key, StandardCharsets.ISO_8859_1);
        if (text.contains("-----BEGIN ")) {
            return text.contains("ENCRYPTED");
        }
        try {
            new javax.crypto.EncryptedPrivateKeyInfo(key);
            return true;
        } catch (IOException | RuntimeException notEncrypted) {
            return false;
        }
    }

    /** A key as pgjdbc reads it, PEM or DER (PKCS #8, its {@code .pk8}), as the PEM the Vert.x client reads. */
    static Buffer pemKey(byte[] key) {
        String text = new String(key, StandardCharsets.ISO_8859_1);
        if (text.contains("-----BEGIN ")) {
            return Buffer.buffer(key);
        }
        return Buffer.buffer("-----BEGIN PRIVATE KEY-----\n"
                + Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(key) + "\n-----END PRIVATE KEY-----\n");
    }
}
