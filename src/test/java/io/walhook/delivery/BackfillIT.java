package io.walhook.delivery;

import static io.walhook.delivery.ItemsSetup.TOKEN;
import static io.walhook.delivery.ItemsSetup.env;
import static io.walhook.delivery.ItemsSetup.events;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;

import io.walhook.testing.ApiClient;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * Backfills from outside, against the packaged jar: consistency with writers changing the whole key
 * range while the table is read, a kill -9 mid-backfill, composite and text keys with filters, the
 * configured initial backfill, a table dropped mid-backfill, and every refusal.
 */
class BackfillIT {

    private static final Duration WAIT = Duration.ofSeconds(180);

    /** Every event of accepted requests in arrival order, and the table replayed from them per key. */
    private static final class Replay {
        final List<JsonNode> events = new ArrayList<>();
        final Map<String, String> rows = new HashMap<>();
        final Map<String, Set<String>> readIds = new HashMap<>();
        int reads;

        synchronized void add(WebhookReceiver.Request request) {
            for (JsonNode event : events(request)) {
                events.add(event);
                String op = event.get("op").asText();
                String key = event.get("key").toString();
                switch (op) {
                    case "insert", "read" -> rows.put(key, event.get("new").toString());
                    case "update" -> {
                        // its key is the old one: one that changed moves the row (a consumer applies it so)
                        com.fasterxml.jackson.databind.node.ObjectNode moved = ((com.fasterxml.jackson.databind.node.ObjectNode)
                                event.get("key")).deepCopy();
                        List<String> columns = new ArrayList<>();
                        moved.fieldNames().forEachRemaining(columns::add);
                        columns.forEach(column -> moved.set(column, event.get("new").get(column)));
                        rows.remove(key);
                        rows.put(moved.toString(), event.get("new").toString());
                    }
                    case "delete" -> rows.remove(key);
                    default -> {
                    }
                }
                if (op.equals("update") && event.get("old") != null && !event.get("old").isNull()) {
                    throw new AssertionError("unexpected old image");
                }
                if (op.equals("read")) {
                    reads++;
                    readIds.computeIfAbsent(key, k -> new HashSet<>()).add(event.get("id").asText());
                }
            }
        }

        synchronized boolean saw(String needle) {
            return events.stream().anyMatch(e -> e.toString().contains(needle));
        }

        synchronized Map<String, String> table() {
            return new TreeMap<>(rows);
        }

        synchronized int reads() {
            return reads;
        }
    }

    /** The table as the receiver should have it: each row's key and whole row, written as the events write them. */
    private static Map<String, String> select(PostgresServer pg, String database, String table, String key)
            throws Exception {
        Map<String, String> rows = new TreeMap<>();
        try (Connection c = pg.connect(database); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT json_build_object(" + key + ")::text, row_to_json(t)::text FROM "
                     + table + " t")) {
            while (rs.next()) {
                rows.put(compact(rs.getString(1)), compact(rs.getString(2)));
            }
        }
        return rows;
    }

    /** The keys whose rows differ (at most 20, with both versions): empty when the replay is the table. */
    private static Map<String, String> differences(Map<String, String> replayed, Map<String, String> table) {
        Map<String, String> differ = new TreeMap<>();
        Set<String> keys = new java.util.TreeSet<>(replayed.keySet());
        keys.addAll(table.keySet());
        for (String key : keys) {
            if (!java.util.Objects.equals(replayed.get(key), table.get(key)) && differ.size() < 20) {
                differ.put(key, "received " + shortened(replayed.get(key)) + ", table has " + shortened(table.get(key)));
            }
        }
        return differ;
    }

    /** A row as a failure shows it: its first 200 characters (a large document's whole text buried the message). */
    private static String shortened(String row) {
        return row == null || row.length() <= 200 ? row : row.substring(0, 200) + "... (" + row.length() + " characters)";
    }

    private static String compact(String json) throws Exception {
        return new com.fasterxml.jackson.databind.ObjectMapper().readTree(json).toString();
    }

    /** A receiver's handler giving each read event it accepts to {@code read} (its whole event). */
    private static java.util.function.Consumer<WebhookReceiver.Request> onReads(java.util.function.Consumer<JsonNode> read) {
        return request -> {
            for (JsonNode event : events(request)) {
                if (event.get("op").asText().equals("read")) {
                    read.accept(event);
                }
            }
        };
    }

    private static boolean tableDone(JsonNode backfill, String table) {
        for (JsonNode t : backfill.path("tables")) {
            if (t.path("table").asText().equals(table)) {
                return t.path("done").asBoolean();
            }
        }
        return false;
    }

    private static JsonNode awaitState(ApiClient api, String path, String state) {
        JsonNode[] last = new JsonNode[1];
        await().atMost(WAIT).until(() -> {
            last[0] = api.get(path).body(); // a problem while the database is away (no state): not yet
            return last[0] != null && state.equals(last[0].path("state").asText());
        });
        return last[0];
    }

    /** PostgreSQL 14 to 18 (or those of {@code -Dbackfill.majors=15,17}). */
    static java.util.stream.IntStream majors() {
        String only = System.getProperty("backfill.majors", "");
        return only.isBlank() ? java.util.stream.IntStream.rangeClosed(14, 18)
                : java.util.Arrays.stream(only.split(",")).mapToInt(m -> Integer.parseInt(m.strip()));
    }

    @org.junit.jupiter.params.ParameterizedTest(name = "PostgreSQL {0}")
    @org.junit.jupiter.params.provider.MethodSource("majors")
    void aBackfillWhileWritersChangeTheWholeKeyRangeReproducesTheTable(int major) throws Exception {
        PostgresServer pg = TestPostgres.shared(major);
        String database = pg.createDatabase("backfill");
        int rows = 40_000;
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL, tag text)",
                "INSERT INTO items SELECT g, 0, 'v' || g FROM generate_series(1, " + rows + ") g");
        Replay replay = new Replay();
        try (WebhookReceiver receiver = WebhookReceiver.start(replay::add)) {
            try (WalhookProcess walhook = WalhookProcess.start(env(pg, database,
                    "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                    "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "100"))) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                Writers writers = new Writers(pg, database, rows, 0, 1);
                await().atMost(WAIT).until(() -> writers.written.get() > 50);
                ApiClient.Answer started = api.post("/subscriptions/config:all/backfills",
                        "{\"tables\": [\"public.items\"], \"chunk_size\": 500}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() > 5_000);
                JsonNode running = api.status("all").get("backfills");
                assertThat(running).as("/status shows the backfill running").hasSize(1);
                assertThat(running.get(0).get("id").asText()).isEqualTo(started.body().get("id").asText());
                writers.stop(); // some time after the backfill started, and before it ends
                JsonNode done = awaitDoneAndALastChange(api, path, pg, database, rows, replay);
                assertThat(writers.written.get()).as("writes while the backfill ran").isGreaterThan(200);
                Map<String, String> expected = select(pg, database, "items", "'id', id");
                assertThat(differences(replay.table(), expected))
                        .as("applying the events per key in arrival order gives the table").isEmpty();
                assertThat(done.get("tables").get(0).get("done").asBoolean()).isTrue();
                assertThat(done.get("rows_sent").asLong()).isEqualTo(replay.reads()).isPositive();
                JsonNode read = replay.events.stream().filter(e -> e.get("op").asText().equals("read")).findFirst()
                        .orElseThrow();
                assertThat(read.get("tx").isNull()).isTrue();
                assertThat(read.get("old").isNull()).isTrue();
                assertThat(read.at("/backfill/id").asText()).isEqualTo(started.body().get("id").asText());
                assertThat(read.get("schema").asText()).isEqualTo("public");
                assertThat(read.get("table").asText()).isEqualTo("items");
            }
        }
    }

    /**
     * PostgreSQL writes a commit record before the transaction leaves the proc array, and a
     * synchronous commit waits for its standby in between: the stream delivers the change while a
     * snapshot taken then still sees the transaction in progress. A chunk read with such a
     * snapshot holds the row's older value, after the stream delivered the newer one; walhook
     * reads the chunk again once the transaction is visible. Also when the stream delivered it
     * before walhook restarted: the one that resumes past it never sees it in the stream.
     */
    @org.junit.jupiter.params.ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.ValueSource(strings = {"delivered by this instance", "delivered before a restart"})
    void aTransactionTheStreamDeliveredButSnapshotsStillSeeInProgressDoesNotMakeARowOlder(String when) throws Exception {
        boolean restart = when.endsWith("restart");
        io.walhook.testing.EmbeddedPostgres pg = io.walhook.testing.EmbeddedPostgres.builder()
                .major(TestPostgres.defaultMajor()).setting("synchronous_standby_names", "nobody")
                .setting("synchronous_commit", "local").start();
        try {
            String database = pg.createDatabase("backfill_commit");
            pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)",
                    "INSERT INTO items SELECT g, 0 FROM generate_series(1, 2000) g");
            Replay replay = new Replay();
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "100");
            try (WebhookReceiver receiver = WebhookReceiver.start(replay::add);
                 WalhookProcess first = WalhookProcess.start(withUrl(env, receiver))) {
                first.awaitReady(WAIT);
                int[] backend = new int[1];
                Thread committing = new Thread(() -> {
                    try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                        try (ResultSet rs = s.executeQuery("SELECT pg_backend_pid()")) {
                            rs.next();
                            backend[0] = rs.getInt(1);
                        }
                        s.execute("SET synchronous_commit = on"); // waits for the standby 'nobody' after its commit record
                        s.execute("UPDATE items SET n = 999 WHERE id = 1");
                    } catch (java.sql.SQLException e) {
                        // the cancel ends the wait; the transaction is committed locally
                    }
                });
                committing.start();
                await().atMost(WAIT).until(() -> replay.saw("\"n\":999"));
                if (restart) {
                    first.terminate(); // acknowledges the change it delivered: the next resumes past it
                    assertThat(first.awaitExit(WAIT)).as(first.output()).isZero();
                }
                try (WalhookProcess second = restart ? WalhookProcess.start(withUrl(env, receiver)) : null) {
                    WalhookProcess walhook = restart ? second : first;
                    walhook.awaitReady(WAIT);
                    ApiClient api = new ApiClient(walhook, TOKEN);
                    // a rate that never holds a chunk back: its first chunk is read again and again, with pauses
                    ApiClient.Answer started = api.post("/subscriptions/config:all/backfills",
                            "{\"chunk_size\": 100, \"max_rows_per_second\": 100000}");
                    assertThat(started.status()).as(started.text()).isEqualTo(202);
                    String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                    long scansBefore = backfillScans(pg, database);
                    await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(10))
                            .until(() -> api.get(path).body().get("rows_sent").asLong() == 0);
                    assertThat(backfillScans(pg, database) - scansBefore).as("reads of the backfill table while its first"
                            + " chunk waits to be read again: the runner waits, it does not spin").isLessThan(200);
                    // read again and again, the backfill running with no progress: the log says why (it said nothing)
                    String warning = "backfill " + started.body().get("id").asText() + ": a chunk of public.items was read "
                            + io.walhook.backfill.BackfillRunner.READ_AGAIN_WARN + " times";
                    await().atMost(Duration.ofSeconds(30)).until(() -> walhook.output().contains(warning));
                    String line = walhook.output().lines().filter(l -> l.contains(warning)).findFirst().orElseThrow();
                    assertThat(line).contains("WARN").contains(restart
                            ? "which committed before it and which this walhook did not deliver (it waits for a synchronous"
                                    + " standby: pg_stat_activity's wait_event 'SyncRep')"
                            : "which the stream delivered before its low watermark");
                    pg.execute(database, "SELECT pg_cancel_backend(" + backend[0] + ")");
                    committing.join();
                    awaitState(api, path, "done");
                    pg.execute(database, "INSERT INTO items VALUES (9999, 0)");
                    await().atMost(WAIT).until(() -> replay.saw("\"id\":9999"));
                    assertThat(differences(replay.table(), select(pg, database, "items", "'id', id"))).isEmpty();
                    assertThat(replay.events.stream().filter(e -> e.get("op").asText().equals("update")).count())
                            .as("the change delivered once: after a restart, the stream resumed past it").isOne();
                }
            }
        } finally {
            pg.stop();
        }
    }

    /** {@code env} with the subscription {@code all} sending to the receiver's {@code /all}. */
    private static Map<String, String> withUrl(Map<String, String> env, WebhookReceiver receiver) {
        Map<String, String> with = new java.util.HashMap<>(env);
        with.put("WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"));
        return with;
    }

    /**
     * A crash that loses committed transactions (synchronous_commit off, their WAL not yet flushed):
     * the high watermarks of the chunks in flight are gone, so the stream never meets them. The
     * backfill reads those chunks again and ends with the table, rather than waiting for them forever:
     * found when the runner next reads a chunk (held to one a second by its rate), or, with four
     * chunks in flight and nothing to read, when it looks at a chunk the stream is late with.
     */
    @org.junit.jupiter.params.ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.ValueSource(strings = {"still reading", "waiting for its chunks"})
    void chunksWhoseHighWatermarksACrashLostAreReadAgain(String runner) throws Exception {
        boolean reading = runner.equals("still reading");
        io.walhook.testing.EmbeddedPostgres pg = io.walhook.testing.EmbeddedPostgres.builder()
                .major(TestPostgres.defaultMajor()).unflushedCommits().start();
        try {
            String database = pg.createDatabase("backfill_lost");
            pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL, tag text)",
                    "INSERT INTO items SELECT g, 0, 'v' || g FROM generate_series(1, 500) g", "CHECKPOINT");
            Replay replay = new Replay();
            try (WebhookReceiver receiver = WebhookReceiver.start(replay::add);
                 WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL",
                         receiver.url("/all"), "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "100"))) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                pg.execute(database, "UPDATE items SET tag = 'streamed' WHERE id = 1");
                await().atMost(WAIT).until(() -> replay.saw("\"tag\":\"streamed\""));
                pg.holdWalWriter();

                ApiClient.Answer started = api.post("/subscriptions/config:all/backfills", reading
                        ? "{\"chunk_size\": 100, \"max_rows_per_second\": 100}" : "{\"chunk_size\": 10}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                // the backfill made durable (and the chunks read so far, which the stream then delivers); a chunk
                // committed after that is in memory only; waiting for its chunks, the runner stays idle a while
                pg.execute(database, "CHECKPOINT");
                String checkpointed = single(pg, database, "SELECT clock_timestamp()::text");
                await().atMost(WAIT).until(() -> "t".equals(single(pg, database, "SELECT count(*) > 0 FROM pg_stat_activity"
                        + " WHERE application_name = 'walhook-backfill' AND state = 'idle' AND query = 'COMMIT'"
                        + " AND state_change > '" + checkpointed + "'"
                        + (reading ? "" : " AND state_change < clock_timestamp() - interval '1 second'"))));
                assertThat(single(pg, database, "SELECT pg_current_wal_insert_lsn() > pg_current_wal_flush_lsn()"))
                        .as("a chunk's commit is in memory only").isEqualTo("t");
                pg.crashLosingUnflushedCommits();

                awaitDoneAndALastChange(api, path, pg, database, 500, replay);
                assertThat(differences(replay.table(), select(pg, database, "items", "'id', id"))).isEmpty();
            }
        } finally {
            pg.stop();
        }
    }

    /** The first column of the first row, or null; null too while the server cannot answer. */
    private static String single(PostgresServer pg, String database, String query) {
        try (Connection c = pg.connect(database); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(query)) {
            return rs.next() ? rs.getString(1) : null;
        } catch (java.sql.SQLException e) {
            return null;
        }
    }

    /** Writers of {@link #write} on threads of their own, one per seed, until stopped. */
    private static final class Writers {
        final AtomicBoolean writing = new AtomicBoolean(true);
        final AtomicInteger written = new AtomicInteger();
        private final List<Thread> threads = new ArrayList<>();

        Writers(PostgresServer pg, String database, int rows, int... seeds) {
            this(pg, database, rows, false, seeds);
        }

        /**
         * {@code keepTable}: deletions only of the rows past the table's first {@code rows}, the ones
         * writers insert: at full speed, a quarter of the writes deleting anywhere emptied the table
         * ahead of a slow backfill, which then ended before the rows a test waited for.
         */
        Writers(PostgresServer pg, String database, int rows, boolean keepTable, int... seeds) {
            for (int seed : seeds) {
                Thread writer = new Thread(() -> write(pg, database, rows, seed, keepTable, writing, written));
                writer.start();
                threads.add(writer);
            }
        }

        void stop() throws InterruptedException {
            writing.set(false);
            for (Thread writer : threads) {
                writer.join();
            }
        }
    }

    /**
     * Waits for the backfill to be done, then for a change committed after it, and for every change
     * before it to be delivered: acknowledged past them, nothing left in memory or in a durable queue.
     * A change committed after every other arriving says nothing of a change of another row that
     * still fails (it holds back only its own row): the table was compared while one was retried.
     */
    private static JsonNode awaitDoneAndALastChange(ApiClient api, String path, PostgresServer pg, String database,
            int rows, Replay replay) throws Exception {
        JsonNode done = awaitState(api, path, "done");
        String lsn;
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            try (ResultSet rs = s.executeQuery("SELECT pg_current_wal_lsn()::text")) { // past every change before it
                rs.next();
                lsn = rs.getString(1);
            }
            s.execute("INSERT INTO items VALUES (" + (10 * rows + 1) + ", 0, 'last')");
        }
        await().atMost(WAIT).until(() -> replay.saw("\"tag\":\"last\""));
        await().atMost(WAIT).until(() -> {
            JsonNode status = api.get("/status").body();
            String acknowledged = status.at("/replication/acknowledged_lsn").asText(null);
            if (acknowledged == null || io.walhook.pgoutput.Lsn.parse(acknowledged).compareTo(io.walhook.pgoutput.Lsn.parse(lsn)) < 0) {
                return false;
            }
            for (JsonNode subscription : status.get("subscriptions")) {
                if (subscription.get("queued").asLong() > 0 || subscription.get("parked").asLong() > 0) {
                    return false;
                }
            }
            return true;
        });
        return done;
    }

    /** Random updates, deletes and inserts over the whole key range (and beyond it), until told to stop. */
    private static void write(PostgresServer pg, String database, int rows, int seed, boolean keepTable,
            AtomicBoolean writing, AtomicInteger written) {
        Random random = new Random(seed);
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            while (writing.get()) {
                int id = 1 + random.nextInt(rows + rows / 10);
                switch (random.nextInt(4)) {
                    case 0 -> s.execute("DELETE FROM items WHERE id = " + (keepTable && id <= rows ? rows + id % (rows / 10) + 1 : id));
                    case 1 -> s.execute("INSERT INTO items VALUES (" + id + ", 1, 'new') ON CONFLICT (id) DO UPDATE"
                            + " SET n = items.n + 1");
                    default -> s.execute("UPDATE items SET n = n + 1, tag = 'u" + random.nextInt(1000) + "' WHERE id = "
                            + id);
                }
                written.incrementAndGet();
            }
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Compound faults: writers change the whole key range while the backfill reads it, the
     * destination fails three requests in ten throughout, and walhook is killed (-9) midway and
     * started again while the writers go on. The events of the requests the destination accepted,
     * applied per key in arrival order, are the table.
     */
    @Test
    void aBackfillKilledMidwayWhileWritersGoOnAndTheDestinationFailsOftenStillReproducesTheTable() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_compound");
        int rows = 20_000;
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL, tag text)",
                "INSERT INTO items SELECT g, 0, 'v' || g FROM generate_series(1, " + rows + ") g");
        Replay replay = new Replay();
        Random failures = new Random(7);
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                synchronized (failures) {
                    if (failures.nextInt(10) < 3) {
                        return 500;
                    }
                }
                replay.add(request); // only what the destination accepted
                return 204;
            });
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                    "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "100");
            Writers writers;
            String path;
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                writers = new Writers(pg, database, rows, 10, 11);
                ApiClient.Answer started = api.post("/subscriptions/config:all/backfills", "{\"chunk_size\": 500}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 4_000);
            } // kill -9, the writers going on
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                await().atMost(WAIT).until(() -> writers.written.get() > 2_000);
                writers.stop();
                awaitDoneAndALastChange(api, path, pg, database, rows, replay);
            }
        }
        assertThat(differences(replay.table(), select(pg, database, "items", "'id', id")))
                .as("applying the accepted events per key in arrival order gives the table").isEmpty();
    }

    /**
     * Compound faults through the API: the destination is down past the retry window (reads and live
     * changes go to the durable queue) while writers go on, the operator edits the subscription's
     * batching mid-backfill, walhook is killed (-9), and the destination comes back after the restart.
     */
    @Test
    void aBackfillIntoADownDestinationEditedAndKilledMidwayReproducesTheTableOnceItIsBack() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_down");
        int rows = 10_000;
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL, tag text)",
                "INSERT INTO items SELECT g, 0, 'v' || g FROM generate_series(1, " + rows + ") g");
        Replay replay = new Replay();
        AtomicBoolean down = new AtomicBoolean(false);
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (down.get()) {
                    return 503;
                }
                replay.add(request);
                return 204;
            });
            Map<String, String> env = env(pg, database, "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true",
                    "WALHOOK_DELIVERY_RETRY_WINDOW", "1s");
            String body = "{\"name\": \"down\", \"tables\": [\"public.items\"], \"batch\": {\"max_events\": %d},"
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/down") + "\"}}";
            Writers writers;
            String path;
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                String id = api.create(body.formatted(100));
                // deleting anywhere, the writers ended the backfill below the rows waited for (5,558 of 6,000)
                writers = new Writers(pg, database, rows, true, 20, 21);
                ApiClient.Answer started = api.post("/subscriptions/" + id + "/backfills",
                        "{\"chunk_size\": 200, \"max_rows_per_second\": 2000}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                path = "/subscriptions/" + id + "/backfills/" + started.body().get("id").asText();
                await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 1_000);
                down.set(true);
                await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 4_000);
                await().atMost(WAIT).until(() -> api.status("down").get("parked").asLong() > 0); // the durable queue
                assertThat(api.put("/subscriptions/" + id, body.formatted(7)).status()).isEqualTo(200);
                await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 6_000);
                assertThat(api.get(path).body().get("state").asText()).as("killed midway").isEqualTo("running");
            } // kill -9, the writers going on, the destination still down
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                await().atMost(WAIT).until(() -> writers.written.get() > 2_000);
                down.set(false);
                writers.stop();
                awaitDoneAndALastChange(api, path, pg, database, rows, replay);
            }
        }
        assertThat(differences(replay.table(), select(pg, database, "items", "'id', id")))
                .as("applying the accepted events per key in arrival order gives the table").isEmpty();
    }

    @Test
    void aBackfillKilledMidwayResumesFromItsLastChunkWithTheSameIds() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_kill");
        int rows = 20_000;
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)",
                "INSERT INTO items SELECT g, g FROM generate_series(1, " + rows + ") g");
        Replay replay = new Replay();
        try (WebhookReceiver receiver = WebhookReceiver.start(replay::add)) {
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                    "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "10");
            String path;
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                ApiClient.Answer started = api.post("/subscriptions/config:all/backfills", "{\"chunk_size\": 200}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 2_000);
                assertThat(api.get(path).body().get("state").asText()).isEqualTo("running");
            } // kill -9
            long before = replay.reads();
            assertThat(before).isLessThan(rows);
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                JsonNode done = awaitState(api, path, "done");
                assertThat(done.get("rows_sent").asLong()).as("rows sent across both runs, counted per chunk done")
                        .isBetween((long) rows, (long) rows + 4 * 200 * 2);
            }
        }
        assertThat(differences(replay.table(), select(pg, database, "items", "'id', id"))).isEmpty();
        assertThat(replay.readIds.values()).as("a row read twice (in flight at the kill) has one id")
                .allSatisfy(ids -> assertThat(ids).hasSize(1));
        assertThat(replay.reads()).as("it resumed rather than starting over").isLessThan(2 * rows);
    }

    /**
     * A backfill cancelled while the rows of chunks the stream had met wait for a failing destination:
     * they are delivered (the cancel gives up only what was not on its way yet), and its
     * {@code rows_sent} counts them once they are, rather than stop at the chunks done before.
     */
    @Test
    void aCancelledBackfillCountsTheRowsOfItsChunksDeliveredAfterTheCancel() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_cancel");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)",
                "INSERT INTO items SELECT g, g FROM generate_series(1, 5000) g");
        AtomicBoolean up = new AtomicBoolean();
        Set<String> delivered = ConcurrentHashMap.newKeySet();
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> {
                if (!up.get()) {
                    return 500;
                }
                events(request).stream().filter(e -> e.get("op").asText().equals("read"))
                        .forEach(e -> delivered.add(e.get("key").toString()));
                return 204;
            });
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                    "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "50", "WALHOOK_DELIVERY_MAX_BACKOFF", "200ms");
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                ApiClient.Answer started = api.post("/subscriptions/config:all/backfills", "{\"chunk_size\": 200}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                await().atMost(WAIT).until(() -> receiver.requests("/all").size() >= 3); // a chunk's rows on their way
                assertThat(api.post(path + "/cancel", "").body().get("state").asText()).isEqualTo("cancelled");
                up.set(true);
                await().atMost(WAIT).until(() -> !delivered.isEmpty()
                        && api.get(path).body().get("rows_sent").asLong() == delivered.size());
                await().during(Duration.ofSeconds(2)).atMost(WAIT).until(() ->
                        api.get(path).body().get("rows_sent").asLong() == delivered.size());
                assertThat(delivered.size()).as("a cancel stops the backfill").isLessThan(5000);
            }
        }
    }

    @Test
    void aSubscriptionEditedToLeaveATableOutGetsNoMoreOfThatTablesRows() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_edit");
        pg.execute(database, "CREATE TABLE a_items (id int PRIMARY KEY)", "CREATE TABLE b_items (id int PRIMARY KEY)",
                "INSERT INTO a_items SELECT generate_series(1, 3000)", "INSERT INTO b_items SELECT generate_series(1, 300)");
        Map<String, AtomicInteger> reads = new ConcurrentHashMap<>();
        try (WebhookReceiver receiver = WebhookReceiver.start(onReads(
                    event -> reads.computeIfAbsent(event.get("table").asText(), t -> new AtomicInteger()).incrementAndGet()));
                WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            String body = "{\"name\": \"edited\", \"tables\": [%s], \"destination\": {\"type\": \"webhook\", \"url\": \""
                    + receiver.url("/edited") + "\"}}";
            ApiClient.Answer created = api.post("/subscriptions", body.formatted("\"public.a_items\", \"public.b_items\""));
            assertThat(created.status()).as(created.text()).isEqualTo(201);
            String id = created.body().get("id").asText();
            ApiClient.Answer started = api.post("/subscriptions/" + id + "/backfills",
                    "{\"chunk_size\": 20, \"max_rows_per_second\": 200}");
            assertThat(started.status()).as(started.text()).isEqualTo(202);
            String path = "/subscriptions/" + id + "/backfills/" + started.body().get("id").asText();
            await().atMost(WAIT).until(() -> reads.containsKey("a_items") && reads.get("a_items").get() >= 100);
            // the operator takes a_items out of the subscription while its rows are being read
            ApiClient.Answer edited = api.put("/subscriptions/" + id, body.formatted("\"public.b_items\""));
            assertThat(edited.status()).as(edited.text()).isEqualTo(200);
            // it counts as done at once (its next chunk is not read), not after its last key
            await().atMost(Duration.ofSeconds(5)).until(() -> tableDone(api.get(path).body(), "public.a_items"));
            // chunks routed before the edit arrive: settled once the count stays the same for 2 s
            int[] settled = {reads.get("a_items").get()};
            await().pollInterval(Duration.ofMillis(500)).during(Duration.ofSeconds(2)).atMost(WAIT).until(() -> {
                int now = reads.get("a_items").get();
                boolean same = now == settled[0];
                settled[0] = now;
                return same;
            });
            int afterEdit = reads.get("a_items").get();
            // taken back: the backfill does not go on with it from a key its rows were skipped after
            ApiClient.Answer back = api.put("/subscriptions/" + id, body.formatted("\"public.a_items\", \"public.b_items\""));
            assertThat(back.status()).as(back.text()).isEqualTo(200);
            awaitState(api, path, "done");
            assertThat(reads.get("a_items").get()).as("a_items rows sent after the subscription left the table out")
                    .isEqualTo(afterEdit).isLessThan(3000);
            assertThat(reads.get("b_items").get()).as("the table it still takes, whole").isGreaterThanOrEqualTo(300);
        }
    }

    /**
     * Columns added, dropped and retyped (a rewrite, which hides every row from a snapshot taken
     * before it) while a backfill reads the table: it reads on with the columns as they are, ends
     * done, and sends every row.
     */
    @Test
    void aTableWhoseOtherColumnsAreAlteredDuringTheBackfillIsReadOnWhole() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_evolving");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, a int NOT NULL, b text)",
                "INSERT INTO items SELECT g, g, 'b' || g FROM generate_series(1, 600) g");
        Set<Integer> read = ConcurrentHashMap.newKeySet();
        List<JsonNode> reads = new java.util.concurrent.CopyOnWriteArrayList<>();
        try (WebhookReceiver receiver = WebhookReceiver.start(onReads(event -> {
                    read.add(event.get("new").get("id").asInt());
                    reads.add(event.get("new"));
                }));
                WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL",
                        receiver.url("/all"), "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "100"))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            ApiClient.Answer started = api.post("/subscriptions/config:all/backfills",
                    "{\"chunk_size\": 10, \"max_rows_per_second\": 100}");
            assertThat(started.status()).as(started.text()).isEqualTo(202);
            String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
            await().atMost(WAIT).until(() -> read.size() >= 50);
            pg.execute(database, "ALTER TABLE items ADD COLUMN c int DEFAULT 5");
            await().atMost(WAIT).until(() -> reads.stream().anyMatch(row -> row.path("c").asInt() == 5));
            pg.execute(database, "ALTER TABLE items DROP COLUMN b");
            int before = reads.size();
            await().atMost(WAIT).until(() -> reads.size() > before + 50);
            pg.execute(database, "ALTER TABLE items ALTER COLUMN a TYPE bigint"); // rewrites the table
            JsonNode done = awaitState(api, path, "done");
            assertThat(read).as("every row, through the three ALTERs: " + done).hasSize(600);
            assertThat(reads.get(reads.size() - 1).has("b")).as("the last rows read without the dropped column").isFalse();
        }
    }

    /**
     * A table held under an ACCESS EXCLUSIVE lock (a long ALTER TABLE, VACUUM FULL, CLUSTER) while a
     * backfill reads it: its chunk waits a second for the lock, is read again after a pause, and the
     * backfill ends done with every row once the lock is released.
     */
    @Test
    void aBackfillWaitsOutATableLockAndEndsWhole() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_locked");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)",
                "INSERT INTO items SELECT g, g FROM generate_series(1, 300) g");
        Set<Integer> read = ConcurrentHashMap.newKeySet();
        try (WebhookReceiver receiver = WebhookReceiver.start(onReads(event -> read.add(event.get("new").get("id").asInt())));
                WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL",
                        receiver.url("/all"), "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "100"));
                Connection locker = pg.connect(database); Statement lock = locker.createStatement()) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            ApiClient.Answer started = api.post("/subscriptions/config:all/backfills",
                    "{\"chunk_size\": 100, \"max_rows_per_second\": 50}");
            assertThat(started.status()).as(started.text()).isEqualTo(202);
            String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
            await().atMost(WAIT).until(() -> !read.isEmpty());
            locker.setAutoCommit(false);
            lock.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE");
            // the next chunk waits for the lock, and waits again: it neither fails nor reads past the lock
            await().atMost(WAIT).until(() -> "t".equals(single(pg, database, "SELECT count(*) > 0 FROM pg_locks l JOIN"
                    + " pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.application_name = 'walhook-backfill'")));
            await().pollDelay(Duration.ofSeconds(3)).atMost(WAIT).until(() -> true);
            assertThat(api.get(path).body().get("state").asText()).isEqualTo("running");
            assertThat(read).as("nothing read past the lock").hasSizeLessThan(300);
            locker.commit();
            awaitState(api, path, "done");
            assertThat(read).hasSize(300);
        }
    }

    /** A database of its own with {@code items}: 1,000 rows, each with a {@code doc} stored out of line (TOASTed). */
    private static String toastedItems(PostgresServer pg, String name) throws java.sql.SQLException {
        String database = pg.createDatabase(name);
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL, doc text)",
                "ALTER TABLE items ALTER COLUMN doc SET STORAGE EXTERNAL",
                "INSERT INTO items SELECT g, 0, repeat(md5(g::text), 200) FROM generate_series(1, 1000) g");
        return database;
    }

    /**
     * Rows moved by their key from the part of the table the backfill had yet to read into the part
     * it had read, by an update that leaves a TOASTed value out of the stream: the chunks never read
     * them, and the consumer had the update alone, without the value. Each is read again at its new
     * key, after the update.
     */
    @Test
    void rowsMovedIntoThePartReadByAnUpdateLeavingTheirToastedValueOutAreReadThere() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = toastedItems(pg, "backfill_moved_toast");
        pg.execute(database,
                // five moved together, read again in one chunk: more than its byte bound (8 MiB as it counts them)
                "UPDATE items SET doc = repeat(md5(id::text), 50000) WHERE id BETWEEN 900 AND 904");
        Replay replay = new Replay();
        try (WebhookReceiver receiver = WebhookReceiver.start(replay::add);
                WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL",
                        receiver.url("/all"), "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "20"))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            ApiClient.Answer started = api.post("/subscriptions/config:all/backfills",
                    "{\"chunk_size\": 20, \"max_rows_per_second\": 200}");
            assertThat(started.status()).as(started.text()).isEqualTo(202);
            String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
            await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 100);
            // to keys before the first (read already), and into the middle of what was read (keys deleted there
            // first); doc stays as it was
            pg.execute(database, "UPDATE items SET id = -id WHERE id BETWEEN 900 AND 904",
                    "DELETE FROM items WHERE id BETWEEN 55 AND 59", "UPDATE items SET id = id - 850 WHERE id BETWEEN 905 AND 909");
            assertThat(api.get(path).body().get("state").asText()).as("the rows moved before the backfill read them")
                    .isEqualTo("running");
            awaitState(api, path, "done");
            Map<String, String> table = select(pg, database, "items", "'id', id");
            // the last reads may still be on their way
            await().atMost(Duration.ofSeconds(60))
                    .untilAsserted(() -> assertThat(differences(replay.table(), table)).isEmpty());
        }
    }

    /**
     * Rows moved so while their backfill is paused wait for it to resume. Kept in memory only, a
     * restart meanwhile lost them: the updates that moved them had been acknowledged, and the
     * resumed backfill read on from its position, past the part they had moved into, so that the
     * consumer never had their values. And after the restart, the paused backfill's table was no
     * longer watched (only once a chunk of it was read again): rows moved then were missed too.
     */
    @Test
    void rowsMovedWhileTheBackfillIsPausedBeforeAndAfterARestartAreReadOnceItResumes() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = toastedItems(pg, "backfill_moved_restart");
        Replay replay = new Replay();
        try (WebhookReceiver receiver = WebhookReceiver.start(replay::add)) {
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"));
            String path;
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                ApiClient.Answer started = api.post("/subscriptions/config:all/backfills",
                        "{\"chunk_size\": 20, \"max_rows_per_second\": 200}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 100);
                assertThat(api.post(path + "/pause", "").body().get("state").asText()).isEqualTo("paused");
                // into the part read already, doc as it was
                pg.execute(database, "UPDATE items SET id = -id WHERE id BETWEEN 900 AND 904");
                await().atMost(WAIT).until(() -> replay.saw("\"id\":-904"));
                walhook.terminate(); // acknowledges the updates it delivered: the next resumes past them
                assertThat(walhook.awaitExit(WAIT)).as(walhook.output()).isZero();
            }
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                assertThat(api.get(path).body().get("state").asText()).isEqualTo("paused");
                pg.execute(database, "DELETE FROM items WHERE id BETWEEN 55 AND 59",
                        "UPDATE items SET id = id - 850 WHERE id BETWEEN 905 AND 909");
                await().atMost(WAIT).until(() -> replay.saw("\"key\":{\"id\":909}"));
                assertThat(api.post(path + "/resume", "").status()).isEqualTo(200);
                awaitState(api, path, "done");
                Map<String, String> table = select(pg, database, "items", "'id', id");
                await().atMost(Duration.ofSeconds(60))
                        .untilAsserted(() -> assertThat(differences(replay.table(), table)).isEmpty());
                assertThat(single(pg, database, "SELECT count(*) FROM walhook.backfill_moved")).as("forgotten once read")
                        .isEqualTo("0");
            }
        }
    }

    /**
     * A row of the chunk updated again and again, by updates that leave its TOASTed value out of the
     * stream (unchanged): each time the chunk is read, the row changes between its watermarks, and
     * dropping the read would leave the consumer without the value. Read again whole, the chunk met
     * such an update every time and the backfill never ended; read again in shrinking parts, the
     * part holding that row is read fast enough to fall between two of its updates.
     */
    @Test
    void aChunkWithARowUpdatedOverAndOverLeavingItsToastedValueOutEnds() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = toastedItems(pg, "backfill_hot_toast");
        Set<Integer> read = ConcurrentHashMap.newKeySet();
        java.util.concurrent.atomic.AtomicReference<String> hotDoc = new java.util.concurrent.atomic.AtomicReference<>();
        AtomicBoolean updating = new AtomicBoolean(true);
        AtomicInteger updates = new AtomicInteger();
        java.util.concurrent.atomic.AtomicReference<Throwable> updaterFailed = new java.util.concurrent.atomic.AtomicReference<>();
        try (WebhookReceiver receiver = WebhookReceiver.start(onReads(event -> {
                    read.add(event.get("new").get("id").asInt());
                    if (event.get("new").get("id").asInt() == 500) {
                        hotDoc.set(event.get("new").path("doc").asText(null));
                    }
                }));
                WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL",
                        receiver.url("/all"), "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "100"))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            Thread updater = new Thread(() -> {
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    while (updating.get()) {
                        s.execute("UPDATE items SET n = n + 1 WHERE id = 500"); // doc stays as it was
                        updates.incrementAndGet();
                        s.execute("SELECT pg_sleep(0.005)");
                    }
                } catch (java.sql.SQLException | RuntimeException e) {
                    updaterFailed.set(e);
                }
            }, "hot-row-updater");
            updater.start();
            int[] updatesAtStart = {0};
            try {
                await().atMost(WAIT).until(() -> updates.get() > 0);
                updatesAtStart[0] = updates.get();
                ApiClient.Answer started = api.post("/subscriptions/config:all/backfills", "{\"chunk_size\": 1000}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                await().atMost(Duration.ofSeconds(90)).until(() -> "done".equals(api.get(path).body().path("state").asText()));
                assertThat(read).hasSize(1000);
                assertThat(hotDoc.get()).as("the hot row's read carries its TOASTed value").isEqualTo(
                        single(pg, database, "SELECT doc FROM items WHERE id = 500"));
            } finally {
                updating.set(false);
                updater.join();
            }
            assertThat(updaterFailed.get()).isNull();
            assertThat(updates.get() - updatesAtStart[0]).as("the row was hot throughout the backfill").isGreaterThan(10);
        }
    }

    @Test
    void aBackfillWhoseSubscriptionIsHeldForAWhileWaitsAndSendsEveryRowOnceItIsBack() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_held");
        int rows = 2000;
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY)",
                "INSERT INTO items SELECT generate_series(1, " + rows + ")");
        Set<Integer> received = ConcurrentHashMap.newKeySet();
        try (WebhookReceiver receiver = WebhookReceiver.start(onReads(event -> received.add(event.get("new").get("id").asInt())));
                WalhookProcess walhook = WalhookProcess.start(env(pg, database, "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            ApiClient.Answer created = api.post("/subscriptions", "{\"name\": \"held\", \"tables\": [\"public.items\"],"
                    + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/held") + "\"}}");
            assertThat(created.status()).as(created.text()).isEqualTo(201);
            String id = created.body().get("id").asText();
            ApiClient.Answer started = api.post("/subscriptions/" + id + "/backfills",
                    "{\"chunk_size\": 20, \"max_rows_per_second\": 200}");
            assertThat(started.status()).as(started.text()).isEqualTo(202);
            String path = "/subscriptions/" + id + "/backfills/" + started.body().get("id").asText();
            await().atMost(WAIT).until(() -> received.size() >= 100);
            // its stored body stops reading (a newer walhook wrote a field this one does not know): held out of force
            pg.execute(database, "UPDATE walhook.subscription SET body = body || '{\"later\": 1}', updated_at = now()",
                    "SELECT pg_notify('walhook_subscriptions', '')");
            await().atMost(WAIT).until(() -> walhook.output().contains("subscription held (" + id + ") is left out"));
            long scansBefore = backfillScans(pg, database);
            // longer than a deleted subscription's backfill is given before it is cancelled
            await().pollDelay(Duration.ofSeconds(8)).atMost(WAIT).until(() -> true);
            assertThat(backfillScans(pg, database) - scansBefore).as("reads of the backfill table while it waits: it"
                    + " waits, it does not spin").isLessThan(100);
            try (Connection c = pg.connect(database); Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT state FROM walhook.backfill")) {
                assertThat(rs.next()).isTrue();
                assertThat(rs.getString(1)).as("a held subscription's backfill waits").isEqualTo("running");
            }
            pg.execute(database, "UPDATE walhook.subscription SET body = body - 'later', updated_at = now()",
                    "SELECT pg_notify('walhook_subscriptions', '')");
            JsonNode done = awaitState(api, path, "done");
            assertThat(received).as("every row, though chunks were in flight when it was held").hasSize(rows);
            assertThat(done.get("rows_sent").asLong()).isGreaterThanOrEqualTo(rows);
        }
    }

    /** How often walhook's backfill table was read (the statistics of its scans). */
    private static long backfillScans(PostgresServer pg, String database) throws Exception {
        try (Connection c = pg.connect(database); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables"
                     + " WHERE schemaname = 'walhook' AND relname = 'backfill'")) {
            assertThat(rs.next()).isTrue();
            return rs.getLong(1);
        }
    }

    /** Drops the table and creates it again, of the same shape and rows, in one transaction. */
    private static void recreate(PostgresServer pg, String database, int rows) throws Exception {
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            c.setAutoCommit(false);
            s.execute("DROP TABLE items");
            s.execute("CREATE TABLE items (id int PRIMARY KEY)");
            s.execute("INSERT INTO items SELECT generate_series(1, " + rows + ")");
            c.commit();
        }
    }

    @Test
    void aTableDroppedAndCreatedAgainFailsItsBackfillWhileRunningAndAcrossARestart() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_recreated");
        int rows = 3000;
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY)",
                "INSERT INTO items SELECT generate_series(1, " + rows + ")");
        try (WebhookReceiver receiver = WebhookReceiver.start(request -> {
        })) {
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"));
            String second;
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                String body = "{\"chunk_size\": 20, \"max_rows_per_second\": 200}";
                ApiClient.Answer started = api.post("/subscriptions/config:all/backfills", body);
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 100);
                // another table of the same name and shape: its rows before the last key done would never be read
                recreate(pg, database, rows);
                assertThat(awaitState(api, path, "failed").get("error").asText()).contains("public.items")
                        .contains("dropped and created again");

                ApiClient.Answer again = api.post("/subscriptions/config:all/backfills", body);
                assertThat(again.status()).as(again.text()).isEqualTo(202);
                second = "/subscriptions/config:all/backfills/" + again.body().get("id").asText();
                await().atMost(WAIT).until(() -> api.get(second).body().get("rows_sent").asLong() >= 100);
            } // kill -9
            recreate(pg, database, rows);
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                assertThat(awaitState(api, second, "failed").get("error").asText()).as("what it resumes is another table")
                        .contains("dropped and created again");
            }
        }
    }

    /**
     * walhook running as a role of its own, not a superuser, and a table that role reads only through
     * a row-level security policy whose function raises for one row (an error of the server's own,
     * neither a lost connection nor a type or syntax error). Each read of the chunk holding that row
     * fails the same way. It used to stop the runner's whole round and start it again from the first
     * backfill: the other backfill, started after it, never read a row. That one now ends done with
     * every row while the refused one is tried again alone, then fails naming its table and the error,
     * without the server's detail: the API's error showed the whole of PostgreSQL's text, which can
     * quote the row (every read-token holder sees a backfill's error).
     */
    @Test
    void aTableTheServerRefusesToReadFailsItsOwnBackfillWhileAnotherEndsWhole() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_refused");
        String role = "reader_" + database;
        pg.execute(database, "CREATE TABLE sealed (id int PRIMARY KEY, n int NOT NULL)",
                "INSERT INTO sealed SELECT g, g FROM generate_series(1, 200) g",
                "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)",
                "INSERT INTO items SELECT g, g FROM generate_series(1, 300) g",
                "CREATE FUNCTION unsealed(id int) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN"
                        + " IF id = 150 THEN RAISE EXCEPTION 'row % is sealed', id USING DETAIL = 'held for tenant-'"
                        + " || (id * 7); END IF; RETURN true; END $$",
                "ALTER TABLE sealed ENABLE ROW LEVEL SECURITY",
                "CREATE POLICY unsealed_rows ON sealed FOR SELECT USING (unsealed(id))",
                "CREATE PUBLICATION walhook FOR TABLE sealed, items",
                "CREATE ROLE " + role + " LOGIN REPLICATION PASSWORD 'pw'",
                "GRANT CREATE ON DATABASE " + database + " TO " + role,
                "GRANT SELECT ON sealed, items TO " + role);
        Set<String> read = ConcurrentHashMap.newKeySet();
        try (WebhookReceiver receiver = WebhookReceiver.start(onReads(
                event -> read.add(event.get("table").asText() + ":" + event.get("new").get("id").asInt())));
                WalhookProcess walhook = WalhookProcess.start(env(pg, database,
                        "WALHOOK_SOURCE_URL", "postgresql://" + role + ":pw@127.0.0.1:" + pg.port() + "/" + database,
                        "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all")))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            ApiClient.Answer sealed = api.post("/subscriptions/config:all/backfills",
                    "{\"tables\": [\"public.sealed\"], \"chunk_size\": 20}");
            assertThat(sealed.status()).as(sealed.text()).isEqualTo(202);
            ApiClient.Answer items = api.post("/subscriptions/config:all/backfills",
                    "{\"tables\": [\"public.items\"], \"chunk_size\": 20}");
            assertThat(items.status()).as(items.text()).isEqualTo(202);
            String sealedPath = "/subscriptions/config:all/backfills/" + sealed.body().get("id").asText();
            String itemsPath = "/subscriptions/config:all/backfills/" + items.body().get("id").asText();

            awaitState(api, itemsPath, "done");
            assertThat(read.stream().filter(r -> r.startsWith("items:"))).hasSize(300);
            JsonNode failed = awaitState(api, sealedPath, "failed");
            assertThat(failed.get("error").asText()).contains("public.sealed").contains("a function raised an error")
                    .contains("SQLSTATE P0001").as("tried again before it failed").contains("5 times in a row")
                    .as("what the server's detail quoted of the row is not shown to the read token").doesNotContain("tenant-1050")
                    .as("nor what the function's own words quoted of it").doesNotContain("150");
            assertThat(read).as("the sealed table's rows before the refused one").contains("sealed:140")
                    .doesNotContain("sealed:150");
        }
    }

    /**
     * A key whose order changed while its backfill was paused: its saved position, compared in the
     * new order, would skip rows (text '10' comes before '2'; the integer 10 after 2), and the
     * backfill would end done without them. It fails instead, naming the change.
     */
    @Test
    void aKeyWhoseOrderChangedWhileTheBackfillWasPausedFailsItRatherThanSkipRows() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_rekeyed");
        pg.execute(database, "CREATE TABLE items (id text PRIMARY KEY)",
                "INSERT INTO items SELECT generate_series(1, 3000)::text");
        try (WebhookReceiver receiver = WebhookReceiver.start(request -> {
        });
                WalhookProcess walhook = WalhookProcess.start(env(pg, database,
                        "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all")))) {
            walhook.awaitReady(WAIT);
            ApiClient api = new ApiClient(walhook, TOKEN);
            ApiClient.Answer started = api.post("/subscriptions/config:all/backfills",
                    "{\"chunk_size\": 20, \"max_rows_per_second\": 200}");
            assertThat(started.status()).as(started.text()).isEqualTo(202);
            String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
            await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 100);
            assertThat(api.post(path + "/pause", "").body().get("state").asText()).isEqualTo("paused");
            pg.execute(database, "ALTER TABLE items ALTER COLUMN id TYPE int USING id::int");
            assertThat(api.post(path + "/resume", "").status()).isEqualTo(200);
            assertThat(awaitState(api, path, "failed").get("error").asText()).contains("public.items")
                    .contains("key changed since the backfill's saved position").contains("now id integer");
        }
    }

    @Test
    void aStandbyThatTakesOverFinishesTheBackfillFromItsLastChunk() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_failover");
        int rows = 10_000;
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)",
                "INSERT INTO items SELECT g, g FROM generate_series(1, " + rows + ") g");
        Replay replay = new Replay();
        try (WebhookReceiver receiver = WebhookReceiver.start(replay::add)) {
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                    "WALHOOK_SUBSCRIPTIONS_ALL_BATCH_MAX_EVENTS", "10", "WALHOOK_STANDBY_POLL_INTERVAL", "200ms");
            try (WalhookProcess active = WalhookProcess.start(env)) {
                active.awaitReady(WAIT);
                try (WalhookProcess standby = WalhookProcess.start(env)) {
                    standby.awaitReady(WAIT);
                    ApiClient api = new ApiClient(standby, TOKEN);
                    assertThat(api.get("/status").body().get("role").asText()).isEqualTo("standby");
                    ApiClient.Answer started = api.post("/subscriptions/config:all/backfills",
                            "{\"chunk_size\": 100, \"max_rows_per_second\": 2000}");
                    assertThat(started.status()).as("a standby takes the request; the active instance runs it")
                            .isEqualTo(202);
                    String path = "/subscriptions/config:all/backfills/" + started.body().get("id").asText();
                    // at once, not at the active instance's next look at its table (every 30 s): the write notifies it
                    // (20 s: its first chunk is read, met by the stream, delivered and saved, across two processes)
                    await().atMost(Duration.ofSeconds(20)).until(() -> api.get(path).body().get("rows_sent").asLong() > 0);
                    await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() >= 1_000);
                    active.close(); // kill -9: the standby takes the slot over, and the backfill with it
                    await().atMost(WAIT).until(() -> "active".equals(api.get("/status").body().path("role").asText()));
                    JsonNode done = awaitState(api, path, "done");
                    assertThat(done.get("rows_sent").asLong()).isBetween((long) rows, rows + 4L * 100 * 2);
                }
            }
        }
        assertThat(differences(replay.table(), select(pg, database, "items", "'id', id"))).isEmpty();
        assertThat(replay.readIds.values()).allSatisfy(ids -> assertThat(ids).hasSize(1));
    }

    @Test
    void compositeAndTextKeysWithTheBackfillsAndTheSubscriptionsFilters() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_keys");
        pg.execute(database, "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
                "CREATE TABLE accounts (tenant text, id uuid, mood mood, amount numeric(12,2), PRIMARY KEY (tenant, id))",
                "INSERT INTO accounts SELECT CASE WHEN g % 3 = 0 THEN 'acme' WHEN g % 3 = 1 THEN 'Zeta co' ELSE 'b\"q' END,"
                        + " md5(g::text)::uuid, (ARRAY['sad','ok','happy'])[1 + g % 3]::mood, g * 1.25"
                        + " FROM generate_series(1, 3000) g",
                "CREATE TABLE nokey (a int)",
                "CREATE TABLE scores (grade mood, score numeric, note text, PRIMARY KEY (grade, score))",
                "INSERT INTO scores SELECT (ARRAY['sad','ok','happy'])[1 + g % 3]::mood, g / 7.0, 'n' || g"
                        + " FROM generate_series(1, 1000) g",
                "CREATE TABLE codes (code char(3) PRIMARY KEY, n int)",
                "INSERT INTO codes SELECT chr(65 + g / 26 % 26) || chr(65 + g % 26) || chr(97 + g % 7), g"
                        + " FROM generate_series(0, 675) g");
        Replay replay = new Replay();
        try (WebhookReceiver receiver = WebhookReceiver.start(replay::add)) {
            try (WalhookProcess walhook = WalhookProcess.start(env(pg, database,
                    "WALHOOK_SUBSCRIPTIONS_BIG_URL", receiver.url("/big"),
                    "WALHOOK_SUBSCRIPTIONS_BIG_TABLES", "public.accounts,public.nokey",
                    "WALHOOK_SUBSCRIPTIONS_SCORES_URL", receiver.url("/scores"),
                    "WALHOOK_SUBSCRIPTIONS_SCORES_TABLES", "public.scores,public.codes",
                    "WALHOOK_SUBSCRIPTIONS_BIG_FILTER", "op != \"read\" || new.amount > 100.0",
                    "WALHOOK_SUBSCRIPTIONS_BIG_BATCH_MAX_EVENTS", "50"))) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                ApiClient.Answer started = api.post("/subscriptions/config:big/backfills",
                        "{\"tables\": [\"public.accounts\"], \"filter\": \"new.tenant != \\\"acme\\\"\", \"chunk_size\": 7}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                String path = "/subscriptions/config:big/backfills/" + started.body().get("id").asText();
                JsonNode done = awaitState(api, path, "done");
                Map<String, String> expected = new TreeMap<>(select(pg, database,
                        "(SELECT * FROM accounts WHERE tenant <> 'acme' AND amount > 100) ", "'tenant', tenant, 'id', id"));
                await().atMost(WAIT).until(() -> replay.table().size() == expected.size());
                assertThat(replay.table()).isEqualTo(expected);
                assertThat(done.get("rows_sent").asLong()).isEqualTo(expected.size());
                assertThat(replay.saw("\"mood\":\"happy\"")).isTrue();

                // an enum and a numeric as the key, read three rows at a time
                ApiClient.Answer scores = api.post("/subscriptions/config:scores/backfills",
                        "{\"tables\": [\"public.scores\"], \"chunk_size\": 3}");
                assertThat(scores.status()).as(scores.text()).isEqualTo(202);
                awaitState(api, "/subscriptions/config:scores/backfills/" + scores.body().get("id").asText(), "done");
                Map<String, String> expectedScores = select(pg, database, "scores", "'grade', grade, 'score', score");
                await().atMost(WAIT).until(() -> replay.table().keySet().containsAll(expectedScores.keySet()));
                Map<String, String> replayedScores = new TreeMap<>(replay.table());
                replayedScores.keySet().retainAll(expectedScores.keySet());
                assertThat(differences(replayedScores, expectedScores)).isEmpty();

                // a char(3) key: the cursor keeps its length (a cast to plain character would cut it to one)
                ApiClient.Answer codes = api.post("/subscriptions/config:scores/backfills",
                        "{\"tables\": [\"public.codes\"], \"chunk_size\": 5}");
                assertThat(codes.status()).as(codes.text()).isEqualTo(202);
                JsonNode codesDone = awaitState(api, "/subscriptions/config:scores/backfills/"
                        + codes.body().get("id").asText(), "done");
                assertThat(codesDone.get("rows_sent").asLong()).isEqualTo(676);
                Map<String, String> expectedCodes = select(pg, database, "codes", "'code', code");
                await().atMost(WAIT).until(() -> replay.table().keySet().containsAll(expectedCodes.keySet()));

                // refusals, each naming what is wrong
                assertThat(api.post("/subscriptions/config:big/backfills", "{\"tables\": [\"public.nokey\"]}"))
                        .satisfies(a -> assertThat(a.status()).isEqualTo(400))
                        .satisfies(a -> assertThat(a.text()).contains("public.nokey").contains("no primary key"));
                assertThat(api.post("/subscriptions/config:big/backfills", "{\"tables\": [\"public.missing\"]}").text())
                        .contains("outside subscription big");
                assertThat(api.post("/subscriptions/config:big/backfills", "{\"filter\": \"new.x ==\"}"))
                        .satisfies(a -> assertThat(a.status()).isEqualTo(400))
                        .satisfies(a -> assertThat(a.body().get("field").asText()).isEqualTo("/filter"));
                assertThat(api.post("/subscriptions/config:big/backfills", "{\"chunk_size\": 0}").body().get("field")
                        .asText()).isEqualTo("/chunk_size");
                assertThat(api.post("/subscriptions/config:big/backfills", "{\"chunk\": 10}").body().get("field")
                        .asText()).isEqualTo("/chunk");
                assertThat(api.post("/subscriptions/config:big/backfills", "{\"tables\": \"public.accounts\"}").status())
                        .isEqualTo(400);
                assertThat(api.post("/subscriptions/config:nope/backfills", "{}").status()).isEqualTo(404);
                assertThat(api.get("/subscriptions/config:big/backfills/not-a-uuid").status()).isEqualTo(404);
                assertThat(api.post(path + "/pause", "").status()).as("a done backfill cannot be paused").isEqualTo(409);

                // pause, a second backfill of the same table refused while it holds it, resume, cancel
                ApiClient.Answer slow = api.post("/subscriptions/config:big/backfills",
                        "{\"tables\": [\"public.accounts\"], \"chunk_size\": 1, \"max_rows_per_second\": 20}");
                assertThat(slow.status()).as(slow.text()).isEqualTo(202);
                String slowPath = "/subscriptions/config:big/backfills/" + slow.body().get("id").asText();
                assertThat(api.post(slowPath + "/pause", "").body().get("state").asText()).isEqualTo("paused");
                assertThat(api.post("/subscriptions/config:big/backfills", "{}").text())
                        .as("the subscription's tables by default, a keyless one among them").contains("public.nokey");
                ApiClient.Answer second = api.post("/subscriptions/config:big/backfills",
                        "{\"tables\": [\"public.accounts\"]}");
                assertThat(second.status()).isEqualTo(409);
                assertThat(second.text()).contains("public.accounts").contains(slow.body().get("id").asText());
                long paused = api.get(slowPath).body().get("rows_sent").asLong();
                assertThat(api.post(slowPath + "/resume", "").body().get("state").asText()).isEqualTo("running");
                await().atMost(WAIT).until(() -> api.get(slowPath).body().get("rows_sent").asLong() > paused);
                assertThat(api.post(slowPath + "/cancel", "").body().get("state").asText()).isEqualTo("cancelled");
                assertThat(api.post(slowPath + "/resume", "").status()).isEqualTo(409);
                assertThat(api.get("/subscriptions/config:big/backfills").body()).hasSize(2);
            }
        }
    }

    @Test
    void theInitialBackfillRunsOnceADroppedTableFailsItsBackfillOnlyAndAnAlteredOneIsReadOnUnlessItsKeyChanged() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("backfill_initial");
        pg.execute(database, "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)",
                "INSERT INTO items SELECT g, g FROM generate_series(1, 500) g",
                // read first, and cannot be read in chunks: left out, named, and the rest backfilled
                "CREATE TABLE aa_loose (n int)", "INSERT INTO aa_loose SELECT generate_series(1, 10)",
                "CREATE TABLE reshaped (id bigint PRIMARY KEY)",
                "INSERT INTO reshaped SELECT g FROM generate_series(1, 100000) g",
                "CREATE TABLE doomed (id bigint PRIMARY KEY)",
                "INSERT INTO doomed SELECT g FROM generate_series(1, 100000) g");
        Replay replay = new Replay();
        try (WebhookReceiver receiver = WebhookReceiver.start(replay::add)) {
            Map<String, String> env = env(pg, database, "WALHOOK_SUBSCRIPTIONS_ALL_URL", receiver.url("/all"),
                    "WALHOOK_SUBSCRIPTIONS_ALL_TABLES", "public.aa_loose,public.items",
                    "WALHOOK_SUBSCRIPTIONS_ALL_BACKFILL", "initial",
                    "WALHOOK_SUBSCRIPTIONS_OTHER_URL", receiver.url("/other"),
                    "WALHOOK_SUBSCRIPTIONS_OTHER_TABLES", "public.doomed,public.reshaped");
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                await().atMost(WAIT).until(() -> {
                    JsonNode list = api.get("/subscriptions/config:all/backfills").body();
                    return list.size() == 1 && list.get(0).get("state").asText().equals("done");
                });
                assertThat(api.get("/subscriptions/config:all/backfills").body().get(0).get("origin").asText())
                        .isEqualTo("initial");
                await().atMost(WAIT).until(() -> replay.reads() == 500);
                assertThat(walhook.output()).contains("public.aa_loose has no primary key");

                ApiClient.Answer reshaping = api.post("/subscriptions/config:other/backfills",
                        "{\"tables\": [\"public.reshaped\"], \"chunk_size\": 10, \"max_rows_per_second\": 200}");
                assertThat(reshaping.status()).as(reshaping.text()).isEqualTo(202);
                ApiClient.Answer started = api.post("/subscriptions/config:other/backfills",
                        "{\"tables\": [\"public.doomed\"], \"chunk_size\": 10, \"max_rows_per_second\": 200}");
                assertThat(started.status()).as(started.text()).isEqualTo(202);
                String path = "/subscriptions/config:other/backfills/" + started.body().get("id").asText();
                await().atMost(WAIT).until(() -> api.get(path).body().get("rows_sent").asLong() > 0);
                pg.execute(database, "DROP TABLE doomed");
                JsonNode failed = awaitState(api, path, "failed");
                assertThat(failed.get("error").asText()).contains("public.doomed");
                String reshapedPath = "/subscriptions/config:other/backfills/" + reshaping.body().get("id").asText();
                // altered in its other columns, it is read on, with its columns as they are now
                pg.execute(database, "ALTER TABLE reshaped ADD COLUMN later int DEFAULT 7");
                await().atMost(WAIT).until(() -> replay.saw("\"later\":7"));
                assertThat(api.get(reshapedPath).body().get("state").asText()).isEqualTo("running");
                // altered in its key, it fails: its position would be compared in another order
                pg.execute(database, "ALTER TABLE reshaped DROP CONSTRAINT reshaped_pkey, ADD PRIMARY KEY (later, id)");
                assertThat(awaitState(api, reshapedPath, "failed").get("error").asText()).contains("public.reshaped")
                        .contains("altered").contains("key");
                pg.execute(database, "INSERT INTO items VALUES (501, 1)");
                await().atMost(WAIT).until(() -> replay.saw("\"id\":501"));
            }
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                ApiClient api = new ApiClient(walhook, TOKEN);
                pg.execute(database, "INSERT INTO items VALUES (502, 1)");
                await().atMost(WAIT).until(() -> replay.saw("\"id\":502"));
                assertThat(api.get("/subscriptions/config:all/backfills").body()).as("a restart starts no second one")
                        .hasSize(1);
                assertThat(replay.reads()).isEqualTo(500 + replay.events.stream()
                        .filter(e -> e.get("op").asText().equals("read") && !e.get("table").asText().equals("items"))
                        .count());
            }
        }
    }
}
