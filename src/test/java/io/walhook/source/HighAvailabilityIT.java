package io.walhook.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/** One active instance per slot with a warm standby, and a graceful stop on SIGTERM, on the packaged jar. */
class HighAvailabilityIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newHttpClient();
    private static final String TOKEN = "standby-token";

    @Test
    void exactlyOneInstanceStreamsAndTheStandbyTakesOverAfterKillMinusNineLosingNothing() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("standby");
        pg.execute(database, "CREATE TABLE jobs (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                    "WALHOOK_API_TOKEN", TOKEN, "WALHOOK_STANDBY_POLL_INTERVAL", "1s",
                    "WALHOOK_SUBSCRIPTIONS_JOBS_URL", receiver.url("/jobs"));
            try (WalhookProcess active = WalhookProcess.start(env)) {
                active.awaitReady(WAIT);
                try (WalhookProcess standby = WalhookProcess.start(env)) {
                    standby.awaitReady(WAIT);
                    assertThat(status(active).get("role").asText()).isEqualTo("active");
                    assertThat(status(standby).get("role").asText()).isEqualTo("standby");
                    JsonNode replication = status(standby).get("replication");
                    assertThat(replication != null && replication.isNull()).as("a standby reads nothing: replication null")
                            .isTrue();

                    pg.execute(database, "INSERT INTO jobs SELECT g FROM generate_series(1, 20) g");
                    await().atMost(WAIT).until(() -> rows(receiver).size() == 20);

                    long killed = System.nanoTime();
                    active.close(); // SIGKILL: its lock is released with its session
                    for (int i = 21; i <= 40; i++) {
                        pg.execute(database, "INSERT INTO jobs VALUES (" + i + ")");
                    }
                    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50))
                            .until(() -> "active".equals(status(standby).path("role").asText()));
                    System.out.printf("standby active %d ms after the active instance was killed%n",
                            (System.nanoTime() - killed) / 1_000_000);
                    try {
                        await().atMost(WAIT).until(() -> rows(receiver).size() == 40);
                    } catch (org.awaitility.core.ConditionTimeoutException e) {
                        throw new AssertionError(rows(receiver).size() + " of 40 rows; standby:\n" + standby.output(), e);
                    }
                    assertThat(standby.output()).contains("takes over from the persisted checkpoint");
                    // a change delivered twice (once by each instance) carries the same id both times
                    Map<Integer, Set<String>> idsOfRow = new HashMap<>();
                    for (WebhookReceiver.Request request : receiver.requests("/jobs")) {
                        idsOfRow.computeIfAbsent(JSON.readTree(request.body()).at("/new/id").asInt(), k -> new HashSet<>())
                                .add(request.header("webhook-id"));
                    }
                    assertThat(idsOfRow.values()).allSatisfy(ids -> assertThat(ids).hasSize(1));
                }
            }
        }
    }

    /**
     * A subscription written through the API whose notification no instance heard (the database's
     * blip that also ended the active instance's lock session): the standby taking over routed with
     * the subscriptions it had last read, up to 30 s old, and the changes it then acknowledged were
     * lost to the subscription. It reads them again as it takes over.
     */
    @Test
    void aStandbyTakingOverRoutesWithTheSubscriptionsAsTheyAreNotAsItLastReadThem() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("standby_fresh");
        pg.execute(database, "CREATE TABLE jobs (id int PRIMARY KEY)", "CREATE TABLE other (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                    "WALHOOK_API_TOKEN", TOKEN, "WALHOOK_STANDBY_POLL_INTERVAL", "1s",
                    "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true");
            try (WalhookProcess active = WalhookProcess.start(env)) {
                active.awaitReady(WAIT);
                HttpResponse<String> created = HTTP.send(HttpRequest.newBuilder(active.uri("/subscriptions"))
                        .header("Authorization", "Bearer " + TOKEN).header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString("{\"name\": \"probe\", \"tables\": [\"public.other\"],"
                                + " \"destination\": {\"type\": \"webhook\", \"url\": \"" + receiver.url("/jobs") + "\"}}"))
                        .build(), HttpResponse.BodyHandlers.ofString());
                assertThat(created.statusCode()).as(created.body()).isEqualTo(201);
                try (WalhookProcess standby = WalhookProcess.start(env)) {
                    standby.awaitReady(WAIT);
                    // an edit to the jobs table whose notification was lost: written as the API writes it, unannounced
                    pg.execute(database, "UPDATE walhook.subscription SET body = replace(body::text, 'public.other',"
                            + " 'public.jobs')::jsonb, updated_at = clock_timestamp() WHERE name = 'probe'");
                    active.close(); // SIGKILL
                    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50))
                            .until(() -> "active".equals(status(standby).path("role").asText()));
                    pg.execute(database, "INSERT INTO jobs VALUES (1)");
                    try {
                        await().atMost(Duration.ofSeconds(60)).until(() -> rows(receiver).contains(1));
                    } catch (org.awaitility.core.ConditionTimeoutException e) {
                        throw new AssertionError("the change routed after the take-over never came; standby:\n"
                                + standby.output(), e);
                    }
                }
            }
        }
    }

    @Test
    void anActiveInstanceWhoseLockSessionIsGoneAndTakenExitsSoTwoNeverRace() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("locklost");
        pg.execute(database, "CREATE TABLE jobs (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                    "WALHOOK_API_TOKEN", TOKEN, "WALHOOK_STANDBY_POLL_INTERVAL", "1s",
                    "WALHOOK_SUBSCRIPTIONS_JOBS_URL", receiver.url("/jobs"));
            try (WalhookProcess active = WalhookProcess.start(env);
                    Connection other = pg.connect(database); Statement s = other.createStatement()) {
                active.awaitReady(WAIT);
                // the active instance's lock session ends (a network cut, an administrator) and another
                // session takes the lock before the instance looks again; should the instance look first
                // and take it back, its new session is ended too
                await().atMost(Duration.ofSeconds(60)).pollDelay(Duration.ZERO).pollInterval(Duration.ofMillis(300))
                        .until(() -> {
                            s.execute(terminateLockSession(database));
                            return tryLock(s, database);
                        });
                assertThat(active.awaitExit(Duration.ofSeconds(30))).as(active.output()).isEqualTo(1);
                assertThat(active.output()).contains("lost the lock of slot " + database);
                try (WalhookProcess standby = WalhookProcess.start(env)) {
                    standby.awaitReady(WAIT);
                    assertThat(status(standby).get("role").asText()).isEqualTo("standby");
                    other.close(); // releases the lock: the standby takes over
                    await().atMost(Duration.ofSeconds(30)).until(() -> "active".equals(status(standby).path("role").asText()));
                    pg.execute(database, "INSERT INTO jobs VALUES (1)");
                    await().atMost(WAIT).until(() -> rows(receiver).size() == 1);
                }
            }
        }
    }

    @Test
    void anInstanceThatLostTheLockWritesNothingMoreToItsQueuesAndTheNextDeliversEveryChangeInOrder() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("fenced");
        pg.execute(database, "CREATE TABLE jobs (id int PRIMARY KEY, n int)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            receiver.respond(request -> 503);
            Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                    "WALHOOK_API_TOKEN", TOKEN, "WALHOOK_SUBSCRIPTIONS_JOBS_URL", receiver.url("/jobs"),
                    "WALHOOK_DELIVERY_RETRY_WINDOW", "500ms", "WALHOOK_DELIVERY_MAX_BACKOFF", "100ms");
            try (WalhookProcess active = WalhookProcess.start(env);
                    Connection other = pg.connect(database); Statement s = other.createStatement()) {
                active.awaitReady(WAIT);
                // its destination fails: the subscription's events go to its durable queue
                pg.execute(database, "INSERT INTO jobs VALUES (1, 1)");
                await().atMost(WAIT).until(() -> parked(pg, database) == 1);
                // its lock session ends and another session takes the lock; the instance has yet to look
                await().atMost(Duration.ofSeconds(60)).pollDelay(Duration.ZERO).pollInterval(Duration.ofMillis(300))
                        .until(() -> {
                            s.execute(terminateLockSession(database));
                            return tryLock(s, database);
                        });
                // changes it still reads meanwhile are not written to the queue, where the next instance's lanes
                // may already have looked: they stay in the slot, which it cannot acknowledge them in
                pg.execute(database, "UPDATE jobs SET n = 2 WHERE id = 1", "INSERT INTO jobs VALUES (2, 1)");
                assertThat(active.awaitExit(Duration.ofSeconds(30))).as(active.output()).isEqualTo(1);
                assertThat(parked(pg, database)).as(active.output()).isEqualTo(1);
                // an instance started while another session holds the lock stands by, and shows the queue it shares
                try (WalhookProcess standby = WalhookProcess.start(env)) {
                    standby.awaitReady(WAIT);
                    JsonNode status = status(standby);
                    assertThat(status.get("role").asText()).isEqualTo("standby");
                    JsonNode jobs = status.get("subscriptions").get(0);
                    assertThat(jobs.get("name").asText()).isEqualTo("jobs");
                    assertThat(jobs.get("parked").asLong()).as(status.toString()).isEqualTo(1);
                    assertThat(jobs.get("mode").asText()).isEqualTo("durable");
                }
            }
            int failed = receiver.requests("/jobs").size();
            receiver.respond(request -> 204);
            try (WalhookProcess next = WalhookProcess.start(env)) {
                next.awaitReady(WAIT);
                // each change once at least (again with its id if delivered twice)
                java.util.function.Supplier<List<String>> delivered = () -> {
                    Map<String, String> changes = new java.util.LinkedHashMap<>();
                    List<WebhookReceiver.Request> requests = receiver.requests("/jobs");
                    for (WebhookReceiver.Request request : requests.subList(failed, requests.size())) {
                        try {
                            JsonNode event = JSON.readTree(request.body());
                            changes.putIfAbsent(request.header("webhook-id"),
                                    event.at("/new/id").asInt() + ":" + event.at("/new/n").asInt());
                        } catch (java.io.IOException e) {
                            throw new IllegalStateException(e);
                        }
                    }
                    return List.copyOf(changes.values());
                };
                await().atMost(WAIT).until(() -> delivered.get().size() >= 3 && parked(pg, database) == 0);
                // order holds per row: row 1's queued change before its newer one; row 2 goes its own way
                List<String> changes = delivered.get();
                assertThat(changes).as(next.output()).containsExactlyInAnyOrder("1:1", "1:2", "2:1");
                assertThat(changes.indexOf("1:1")).as(next.output()).isLessThan(changes.indexOf("1:2"));
            }
        }
    }

    @Test
    void anInstanceThatLostTheLockToAnotherSendsNothingMore() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("lostlock");
        pg.execute(database, "CREATE TABLE jobs (id int PRIMARY KEY, n int)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            java.util.concurrent.atomic.AtomicBoolean up = new java.util.concurrent.atomic.AtomicBoolean();
            receiver.respond(request -> up.get() ? 204 : 503);
            Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                    "WALHOOK_API_TOKEN", TOKEN, "WALHOOK_SUBSCRIPTIONS_JOBS_URL", receiver.url("/jobs"),
                    "WALHOOK_DELIVERY_MAX_BACKOFF", "100ms");
            try (WalhookProcess active = WalhookProcess.start(env);
                    Connection other = pg.connect(database); Statement s = other.createStatement()) {
                active.awaitReady(WAIT);
                // its destination fails: it retries row 1's change from memory, its newer one waiting behind it
                pg.execute(database, "INSERT INTO jobs VALUES (1, 1)", "UPDATE jobs SET n = 2 WHERE id = 1");
                await().atMost(WAIT).until(() -> receiver.requests("/jobs").size() >= 3);
                // its lock session ends and another takes the lock (an instance that goes on to deliver both changes
                // from the slot, which this one never acknowledged)
                await().atMost(Duration.ofSeconds(60)).pollDelay(Duration.ZERO).pollInterval(Duration.ofMillis(300))
                        .until(() -> {
                            s.execute(terminateLockSession(database));
                            return tryLock(s, database);
                        });
                await().atMost(Duration.ofSeconds(30)).until(() -> active.output().contains("lost the lock of slot"));
                // the destination is back: a retry of row 1's first change from here now could follow the other
                // instance's delivery of its second
                up.set(true);
                // a request handed to the client just before the lock was found lost may still arrive (the lease
                // covers it): the count is taken once it has settled
                int[] settled = {receiver.requests("/jobs").size()};
                await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(500)).until(() -> {
                    int now = receiver.requests("/jobs").size();
                    boolean same = now == settled[0];
                    settled[0] = now;
                    return same;
                });
                int sent = settled[0];
                await().during(Duration.ofSeconds(3)).atMost(Duration.ofSeconds(10))
                        .until(() -> receiver.requests("/jobs").size() == sent);
                assertThat(active.awaitExit(Duration.ofSeconds(30))).as(active.output()).isEqualTo(1);
            }
        }
    }

    @Test
    void aTakeOverThatFailsPartWayAndIsTriedAgainDeliversEachQueueFromOneLane() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("retakeover");
        pg.execute(database, "CREATE TABLE jobs (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            java.util.concurrent.atomic.AtomicBoolean up = new java.util.concurrent.atomic.AtomicBoolean();
            List<String> accepted = new java.util.concurrent.CopyOnWriteArrayList<>();
            receiver.respond(request -> {
                if (request.path().equals("/b") && up.get()) {
                    accepted.add(request.header("webhook-id"));
                    return 204;
                }
                return 503;
            });
            Map<String, String> env = new HashMap<>(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                    "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", TOKEN, "WALHOOK_STANDBY_POLL_INTERVAL", "1s",
                    "WALHOOK_DELIVERY_RETRY_WINDOW", "500ms", "WALHOOK_DELIVERY_MAX_BACKOFF", "100ms",
                    "WALHOOK_SUBSCRIPTIONS_JOBS_URL", receiver.url("/a")));
            try (WalhookProcess active = WalhookProcess.start(env)) {
                active.awaitReady(WAIT);
                pg.execute(database, "INSERT INTO jobs VALUES (1)");
                await().atMost(WAIT).until(() -> parked(pg, database) == 1);
                // the standby's first take-over fails after its lanes started (its initial backfill cannot be
                // recorded, once); it tries again
                env.put("WALHOOK_SUBSCRIPTIONS_JOBS_URL", receiver.url("/b"));
                env.put("WALHOOK_SUBSCRIPTIONS_JOBS_BACKFILL", "initial");
                pg.execute(database, "CREATE SEQUENCE walhook_fail_once",
                        "CREATE FUNCTION walhook_fail_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                                + " IF nextval('walhook_fail_once') = 1 THEN RAISE EXCEPTION 'not now'; END IF;"
                                + " RETURN NEW; END $$",
                        "CREATE TRIGGER fail_once BEFORE INSERT ON walhook.backfill FOR EACH ROW"
                                + " EXECUTE FUNCTION walhook_fail_once()");
                try (WalhookProcess standby = WalhookProcess.start(env)) {
                    standby.awaitReady(WAIT);
                    active.close(); // SIGKILL
                    await().atMost(WAIT).until(() -> "active".equals(status(standby).get("role").asText()));
                    assertThat(standby.output()).contains("not now");
                    up.set(true);
                    // the queued change and the initial backfill's read event of the row (an id of its own)
                    await().atMost(WAIT).until(() -> parked(pg, database) == 0 && accepted.size() >= 2);
                    // the queued change once: one lane delivered it, not one of each take-over
                    await().during(Duration.ofSeconds(3)).atMost(Duration.ofSeconds(10))
                            .until(() -> accepted.size() == new HashSet<>(accepted).size());
                    assertThat(accepted).as(standby.output()).hasSize(2);
                }
            }
        }
    }

    /**
     * A standby whose take-over fails for good after it took the lock (here its initial backfill
     * cannot be recorded under its role) let go of the lock: tried again and again from there, it
     * held the lock for good while it said it stood by, and no other instance could take over.
     * Once the one that took over is gone, it can take over itself.
     */
    @Test
    void aStandbyWhoseTakeOverKeepsFailingLetsAnotherTakeOver() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("failedtakeover");
        pg.execute(database, "CREATE TABLE jobs (id int PRIMARY KEY)");
        pg.execute(database, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'broken_standby') THEN"
                + " CREATE ROLE broken_standby SUPERUSER LOGIN PASSWORD 'broken'; END IF; END $$");
        Map<String, String> env = new HashMap<>(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                "WALHOOK_SLOT", database, "WALHOOK_API_TOKEN", TOKEN, "WALHOOK_STANDBY_POLL_INTERVAL", "1s",
                "WALHOOK_SUBSCRIPTIONS_JOBS_URL", "http://127.0.0.1:1/jobs"));
        try (WalhookProcess active = WalhookProcess.start(env)) {
            active.awaitReady(WAIT);
            pg.execute(database, "CREATE FUNCTION walhook_not_for_broken() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                    + " IF current_user = 'broken_standby' THEN RAISE EXCEPTION 'not for this standby'; END IF;"
                    + " RETURN NEW; END $$",
                    "CREATE TRIGGER not_for_broken BEFORE INSERT ON walhook.backfill FOR EACH ROW"
                            + " EXECUTE FUNCTION walhook_not_for_broken()");
            env.put("WALHOOK_SUBSCRIPTIONS_JOBS_BACKFILL", "initial");
            Map<String, String> broken = new HashMap<>(env);
            broken.put("WALHOOK_SOURCE_USER", "broken_standby");
            broken.put("WALHOOK_SOURCE_PASSWORD", "broken");
            try (WalhookProcess failing = WalhookProcess.start(broken)) {
                failing.awaitReady(WAIT);
                active.close(); // SIGKILL
                await().atMost(WAIT).until(() -> failing.output().contains("not for this standby"));
                try (WalhookProcess next = WalhookProcess.start(env)) {
                    next.awaitReady(WAIT);
                    await().atMost(WAIT).ignoreExceptions().until(() -> "active".equals(status(next).get("role").asText()));
                    assertThat(status(failing).get("role").asText()).isEqualTo("standby");
                }
                // the next one gone (the initial backfill it recorded is not recorded again), the first takes over: it
                // counts its activation anew, where the count it kept before let the lock go at every try
                await().atMost(WAIT).ignoreExceptions().until(() -> "active".equals(status(failing).get("role").asText()));
            }
        }
    }

    private static long parked(PostgresServer pg, String database) throws java.sql.SQLException {
        try (Connection c = pg.connect(database); Statement s = c.createStatement();
                java.sql.ResultSet rs = s.executeQuery("SELECT count(*) FROM walhook.parked_event")) {
            rs.next();
            return rs.getLong(1);
        }
    }

    @Test
    void anActiveInstanceWhoseLockSessionEndsKeepsTryingWhileTheDatabaseRefusesItThenTakesTheLockAgain()
            throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("lockagain");
        pg.execute(database, "CREATE TABLE jobs (id int PRIMARY KEY)");
        try (WebhookReceiver receiver = WebhookReceiver.start()) {
            Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                    "WALHOOK_API_TOKEN", TOKEN, "WALHOOK_SUBSCRIPTIONS_JOBS_URL", receiver.url("/jobs"));
            try (WalhookProcess active = WalhookProcess.start(env)) {
                active.awaitReady(WAIT);
                // the lock session ends and, for a while, no new session can be had (the replication
                // stream and the pooled connections stay): the instance keeps streaming and retrying
                pg.execute(pg.defaultDatabase(), "ALTER DATABASE " + database + " ALLOW_CONNECTIONS false",
                        terminateLockSession(database));
                await().atMost(Duration.ofSeconds(30))
                        .until(() -> active.output().contains("cannot take the lock of slot " + database + " again"));
                assertThat(active.isAlive()).isTrue();
                assertThat(active.output()).doesNotContain("took the lock again");
                pg.execute(pg.defaultDatabase(), "ALTER DATABASE " + database + " ALLOW_CONNECTIONS true");
                await().atMost(Duration.ofSeconds(30)).until(() -> active.output().contains("took the lock again"));
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    assertThat(tryLock(s, database)).as("the active instance holds the lock again").isFalse();
                }
                assertThat(status(active).get("role").asText()).isEqualTo("active");
                pg.execute(database, "INSERT INTO jobs VALUES (1)");
                await().atMost(WAIT).until(() -> rows(receiver).size() == 1);
            }
        }
    }

    /** Ends the session holding walhook's lock of a slot, and waits until it is gone. */
    private static String terminateLockSession(String slot) {
        return "SELECT pg_terminate_backend(pid, 10000) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                + " AND pid <> pg_backend_pid() AND classid = " + ActiveLock.NAMESPACE
                + " AND objid = hashtext('" + slot + "')::oid";
    }

    private static boolean tryLock(Statement s, String slot) throws java.sql.SQLException {
        try (java.sql.ResultSet rs = s.executeQuery(
                "SELECT pg_try_advisory_lock(" + ActiveLock.NAMESPACE + ", hashtext('" + slot + "'))")) {
            rs.next();
            return rs.getBoolean(1);
        }
    }

    @Test
    void sigtermDuringAFiftyThousandChangeStreamExitsZeroAndARestartSendsNothingTwice() throws Exception {
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("drain");
        pg.execute(database, "CREATE TABLE jobs (id int PRIMARY KEY)");
        int rows = 50_000;
        Map<String, Integer> deliveries = new java.util.concurrent.ConcurrentHashMap<>();
        try (WebhookReceiver receiver = WebhookReceiver.start(request -> {
            try {
                for (JsonNode event : JSON.readTree(request.body())) {
                    deliveries.merge(event.get("id").asText(), 1, Integer::sum);
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        })) {
            Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database), "WALHOOK_SLOT", database,
                    "WALHOOK_API_TOKEN", TOKEN, "WALHOOK_SUBSCRIPTIONS_JOBS_URL", receiver.url("/jobs"),
                    "WALHOOK_SUBSCRIPTIONS_JOBS_BATCH_MAX_EVENTS", "100");
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(WAIT);
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    for (int start = 1; start <= rows; start += 1000) {
                        s.execute("INSERT INTO jobs SELECT g FROM generate_series(" + start + ", " + (start + 999) + ") g");
                    }
                }
                await().atMost(WAIT).until(() -> deliveries.size() >= 1000);
                walhook.terminate(); // SIGTERM mid-stream
                assertThat(walhook.awaitExit(Duration.ofSeconds(30))).as(walhook.output()).isZero();
                assertThat(walhook.output()).contains("stopped reading");
            }
            int beforeRestart = deliveries.size();
            try (WalhookProcess restarted = WalhookProcess.start(env)) {
                restarted.awaitReady(WAIT);
                try {
                    await().atMost(WAIT).until(() -> deliveries.size() == rows);
                } catch (org.awaitility.core.ConditionTimeoutException e) {
                    throw new AssertionError(deliveries.size() + " of " + rows + " events; restarted:\n" + restarted.output(), e);
                }
                Thread.sleep(1000);
            }
            assertThat(beforeRestart).as("the first instance delivered part of the stream").isBetween(1000, rows);
            assertThat(deliveries.values()).as("an event delivered before SIGTERM is not sent again").allMatch(n -> n == 1);
        }
    }

    private static Set<Integer> rows(WebhookReceiver receiver) throws Exception {
        Set<Integer> rows = new HashSet<>();
        List<WebhookReceiver.Request> requests = receiver.requests("/jobs");
        for (WebhookReceiver.Request request : requests) {
            rows.add(JSON.readTree(request.body()).at("/new/id").asInt());
        }
        return rows;
    }

    private static JsonNode status(WalhookProcess walhook) throws Exception {
        HttpResponse<String> response = HTTP.send(HttpRequest.newBuilder(walhook.uri("/status"))
                .header("Authorization", "Bearer " + TOKEN).build(),
                HttpResponse.BodyHandlers.ofString());
        return JSON.readTree(response.body());
    }
}
