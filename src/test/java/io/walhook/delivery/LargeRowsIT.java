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
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import io.walhook.testing.ApiClient;
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
    private static final Pattern CHANGE = Pattern.compile("\"op\":\\s*\"(\\w+)\".*?\"key\":\\s*\\{\"id\":\\s*(\\d+)");

    /** Counts events by id and keeps nothing of their bodies (600 MB would not fit this JVM either). */
    private static final class CountingReceiver implements AutoCloseable {
        final HttpServer server;
        final ExecutorService executor = Executors.newFixedThreadPool(12);
        final Set<String> ids = ConcurrentHashMap.newKeySet();
        final AtomicLong largest = new AtomicLong();
        /** Each event's op and key, from the head of its body ({@code read 20}). */
        final Set<String> changes = ConcurrentHashMap.newKeySet();

        CountingReceiver() throws IOException {
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
            server.setExecutor(executor);
            server.createContext("/", this::handle);
            server.start();
        }

        private void handle(HttpExchange exchange) throws IOException {
            try (exchange; InputStream in = exchange.getRequestBody()) {
                slowly();
                byte[] head = in.readNBytes(300);
                long length = head.length + in.transferTo(java.io.OutputStream.nullOutputStream());
                largest.accumulateAndGet(length, Math::max);
                Matcher m = ID.matcher(new String(head, StandardCharsets.UTF_8));
                if (m.find()) {
                    ids.add(exchange.getRequestURI().getPath() + " " + m.group(1));
                }
                Matcher change = CHANGE.matcher(new String(head, StandardCharsets.UTF_8));
                if (change.find()) {
                    changes.add(change.group(1) + " " + change.group(2));
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

    @Test
    void aBackfillOfFortyRowsOfTenMegabytesRunsInTheDefaultHeap() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("large_backfill");
        int rows = 40;
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            // 400 MB of documents before walhook starts: only the backfill reads them, in chunks of at most 1,000 rows
            s.execute("CREATE TABLE docs (id int PRIMARY KEY, body jsonb NOT NULL)");
            s.execute("INSERT INTO docs SELECT g, jsonb_build_object('n', g, 'text', repeat(md5(g::text), "
                    + (MEGABYTES << 20) / 32 + ")) FROM generate_series(1, " + rows + ") g");
        }
        try (CountingReceiver receiver = new CountingReceiver();
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database,
                     "WALHOOK_SUBSCRIPTIONS_A_URL", receiver.url("/a"), "WALHOOK_SUBSCRIPTIONS_A_TABLES", "public.docs",
                     "WALHOOK_SUBSCRIPTIONS_A_BACKFILL", "initial"))) {
            await().atMost(Duration.ofMinutes(5)).until(() -> receiver.ids.size() == rows || !walhook.isAlive()
                    || walhook.output().contains("OutOfMemoryError"));
            assertThat(walhook.output()).doesNotContain("OutOfMemoryError");
            assertThat(walhook.isAlive()).as("walhook is running").isTrue();
            assertThat(receiver.ids).hasSize(rows);
            assertThat(receiver.largest.get()).as("each request carries a whole 10 MB row").isGreaterThan(MEGABYTES << 20);
        }
    }

    @Test
    void aChunkReadAgainAfterRowsWereInsertedIntoItsRangeIsCutAtItsBytesAndItsRestReadToo() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("large_again");
        String document = "jsonb_build_object('text', repeat(md5(g::text), " + (3 << 20) / 32 + "))";
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            // rows of 3 MB, keys 10 to 200: a chunk stops at its second row (its byte bound)
            s.execute("CREATE TABLE docs (id int PRIMARY KEY, n int NOT NULL, body jsonb NOT NULL)");
            s.execute("INSERT INTO docs SELECT g, 0, " + document + " FROM generate_series(10, 200, 10) g");
        }
        AtomicBoolean bumping = new AtomicBoolean(true);
        try (CountingReceiver receiver = new CountingReceiver();
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", ItemsSetup.TOKEN,
                     "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"))) {
            walhook.awaitReady(Duration.ofMinutes(2));
            ApiClient api = new ApiClient(walhook, ItemsSetup.TOKEN);
            ApiClient.Answer created = api.post("/subscriptions", "{\"name\": \"docs\", \"tables\": [\"public.docs\"],"
                    + " \"operations\": [\"insert\", \"delete\"], \"destination\": {\"type\": \"webhook\", \"url\": \""
                    + receiver.url("/docs") + "\"}}");
            assertThat(created.status()).as(created.text()).isEqualTo(201);
            String id = created.body().get("id").asText();
            // updates that leave the documents as they are (unchanged TOASTed values): every chunk whose
            // watermarks one falls between is read again, and the subscription takes no updates
            Thread bumper = new Thread(() -> {
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    while (bumping.get()) {
                        s.execute("UPDATE docs SET n = n + 1");
                    }
                } catch (java.sql.SQLException e) {
                    throw new IllegalStateException(e);
                }
            });
            bumper.start();
            ApiClient.Answer started = api.post("/subscriptions/" + id + "/backfills", "{\"max_rows_per_second\": 4}");
            assertThat(started.status()).as(started.text()).isEqualTo(202);
            String path = "/subscriptions/" + id + "/backfills/" + started.body().get("id").asText();
            await().pollDelay(Duration.ofSeconds(2)).atMost(Duration.ofMinutes(1)).until(() -> true);
            // rows inserted between the keys of chunks read already: read again, those chunks stop sooner
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute("INSERT INTO docs SELECT g, 0, " + document + " FROM generate_series(15, 195, 10) g");
            }
            await().pollDelay(Duration.ofSeconds(3)).atMost(Duration.ofMinutes(1)).until(() -> true);
            bumping.set(false);
            bumper.join();
            await().atMost(Duration.ofMinutes(3)).until(() -> api.get(path).body().get("state").asText().equals("done")
                    || !walhook.isAlive());
            for (int key = 10; key <= 200; key += 10) {
                assertThat(receiver.changes).as("row " + key + ", read only by the backfill").contains("read " + key);
            }
            for (int key = 15; key <= 195; key += 10) {
                assertThat(receiver.changes).as("row " + key).containsAnyOf("read " + key, "insert " + key);
            }
        }
    }
}
