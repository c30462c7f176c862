package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;

/**
 * Rows of 10 MB (a jsonb document each) through the packaged jar in its default heap, to three
 * subscriptions: the hand-off queue, the reader's staged events and the lanes' undelivered
 * events are bounded in bytes, not only in events, so the reader waits (answering the server)
 * instead of running out of memory.
 */
class LargeRowsIT {

    private static final int ROWS = 60;
    private static final int MEGABYTES = 10;
    private static final Pattern ID = Pattern.compile("\"id\":\\s*\"([^\"]+)\"");

    /** Counts events by id and keeps nothing of their bodies (600 MB would not fit this JVM either). */
    private static final class CountingReceiver implements AutoCloseable {
        final HttpServer server;
        final ExecutorService executor = Executors.newFixedThreadPool(12);
        final Set<String> ids = ConcurrentHashMap.newKeySet();
        final AtomicLong largest = new AtomicLong();

        CountingReceiver() throws IOException {
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
            server.setExecutor(executor);
            server.createContext("/", this::handle);
            server.start();
        }

        private void handle(HttpExchange exchange) throws IOException {
            try (exchange; InputStream in = exchange.getRequestBody()) {
                slowly();
                byte[] head = in.readNBytes(200);
                long length = head.length + in.transferTo(java.io.OutputStream.nullOutputStream());
                largest.accumulateAndGet(length, Math::max);
                Matcher m = ID.matcher(new String(head, StandardCharsets.UTF_8));
                if (m.find()) {
                    ids.add(exchange.getRequestURI().getPath() + " " + m.group(1));
                }
                exchange.sendResponseHeaders(204, -1);
            }
        }

        /** A slow destination: undelivered rows pile up in walhook's memory budgets, up to their limits. */
        private static void slowly() {
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        String url(String path) {
            return "http://127.0.0.1:" + server.getAddress().getPort() + path;
        }

        @Override
        public void close() {
            server.stop(0);
            executor.shutdownNow();
        }
    }

    @Test
    void sixtyRowsOfTenMegabytesReachThreeSubscriptionsInTheDefaultHeap() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("large_rows");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE docs (id int PRIMARY KEY, body jsonb NOT NULL)");
        }
        try (CountingReceiver receiver = new CountingReceiver();
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database,
                     // three subscriptions of the same rows: their memory budgets share one heap
                     "WALHOOK_SUBSCRIPTIONS_A_URL", receiver.url("/a"), "WALHOOK_SUBSCRIPTIONS_A_TABLES", "public.docs",
                     "WALHOOK_SUBSCRIPTIONS_B_URL", receiver.url("/b"), "WALHOOK_SUBSCRIPTIONS_B_TABLES", "public.docs",
                     "WALHOOK_SUBSCRIPTIONS_C_URL", receiver.url("/c"), "WALHOOK_SUBSCRIPTIONS_C_TABLES", "public.docs"))) {
            walhook.awaitReady(Duration.ofMinutes(2));
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                // three transactions of twenty rows: a transaction's rows wait in the reader until handed on
                for (int t = 0; t < 3; t++) {
                    s.execute("INSERT INTO docs SELECT g, jsonb_build_object('n', g, 'text', repeat(md5(g::text), "
                            + (MEGABYTES << 20) / 32 + ")) FROM generate_series(" + (t * 20 + 1) + ", " + (t * 20 + 20)
                            + ") g");
                }
            }
            await().atMost(Duration.ofMinutes(5)).until(() -> receiver.ids.size() == 3 * ROWS || !walhook.isAlive()
                    || walhook.output().contains("OutOfMemoryError"));
            assertThat(walhook.output()).doesNotContain("OutOfMemoryError");
            assertThat(walhook.isAlive()).as("walhook is running").isTrue();
            assertThat(receiver.ids).hasSize(3 * ROWS);
            assertThat(receiver.largest.get()).as("each request carries a whole 10 MB row").isGreaterThan(MEGABYTES << 20);
        }
    }
}
