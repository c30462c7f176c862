package io.walhook.torture;

import java.io.PrintStream;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.ApiClient;
import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.TcpProxy;
import io.walhook.testing.WalhookProcess;

/**
 * One seeded run of the fault-injection tier: the packaged walhook against its own PostgreSQL, an
 * HTTP receiver and an AMQP peer, while the {@link Workload} writes, faults strike (kill -9,
 * SIGTERM, PostgreSQL restarts, the walsender terminated, every connection left half-open as by a
 * failover (walhook reaches its database through a {@link TcpProxy}), receivers failing, slow, answering 410
 * or odd {@code Retry-After}s, the broker restarting) and the API changes subscriptions (batching,
 * destination, name, pause and resume, replay, delete and recreate, dead letters dropped) and runs
 * backfills (started, paused, resumed, cancelled). Then the faults stop, everything settles, and
 * the invariants are checked.
 *
 * <p>Every choice (which transaction, which fault, which mutation, when) comes from the seed, in
 * order, so a seed replays the same sequence of actions; how they interleave with walhook's own
 * threads is up to the machine, so a failure found by a seed is reproduced by running it again,
 * sometimes a few times.
 */
public final class TortureRun {

    private static final String TOKEN = "torture-token";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration SETTLE = Duration.ofMinutes(4);
    private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(1);

    /** What a run did and found. */
    public record Report(long seed, Duration took, int transactions, int changes, Map<String, Integer> deliveries,
            Map<String, Integer> actions, List<String> violations) {
        public boolean ok() {
            return violations.isEmpty();
        }

        public String summary() {
            return String.format(Locale.ROOT, "seed %d: %s in %ds, %,d transactions, %,d changes, deliveries %s;"
                    + " actions %s%s", seed, ok() ? "every invariant held" : violations.size() + " invariants broken",
                    took.toSeconds(), transactions, changes, deliveries, actions,
                    ok() ? "" : "\n  " + String.join("\n  ", violations));
        }
    }

    private final long seed;
    private final Duration duration;
    private final PrintStream log;
    private final SplittableRandom random;
    private final Ledger ledger = new Ledger();
    private final List<String> violations = new ArrayList<>();
    private final Map<String, Integer> actions = new TreeMap<>();
    /** What could carry a secret: every API answer and every line walhook printed. */
    private final StringBuilder exposed = new StringBuilder();
    private final Map<String, String> env = new LinkedHashMap<>();
    private final String hooksSecret;
    private final String singleSecret;
    private final String headerValue;
    private final String querySecret;
    private EmbeddedPostgres pg;
    private TcpProxy proxy;
    private String database;
    private Observed observed;
    private WalhookProcess walhook;
    private String hooksId;
    private String ephId;
    private int hooksVersion;
    /** The backfills of hooks started so far, in order. */
    private final List<BackfillRun> backfills = new ArrayList<>();
    /** The backfills the run asked to cancel (whatever the answer): the only ones that may end cancelled. */
    private final Set<String> cancelAsked = new HashSet<>();

    /**
     * A backfill of hooks: its id, its tables, and the commit attempts made before it was started
     * (a row whose last change is one of those existed, unchanged, for as long as the backfill ran).
     */
    private record BackfillRun(String id, List<String> tables, long startedAfter) {
    }

    private TortureRun(long seed, Duration duration, PrintStream log) {
        this.seed = seed;
        this.duration = duration;
        this.log = log;
        this.random = new SplittableRandom(seed);
        byte[] key = new byte[24];
        for (int i = 0; i < key.length; i++) {
            key[i] = (byte) random.nextInt(256);
        }
        hooksSecret = "whsec_" + Base64.getEncoder().encodeToString(key);
        key[0] ^= 1;
        singleSecret = "whsec_" + Base64.getEncoder().encodeToString(key);
        headerValue = "hdr" + Long.toHexString(random.nextLong());
        querySecret = "qs" + Long.toHexString(random.nextLong());
    }

    /**
     * Where the reading and routing threads of the walhook running now stand (the top of their stacks,
     * from {@code jcmd Thread.print}): what a stall that did not settle waits on.
     */
    private String pipelineThreads() {
        if (walhook == null || !walhook.isAlive()) {
            return "walhook not running";
        }
        StringBuilder threads = new StringBuilder();
        for (String thread : walhook.threadDump().split("\n\n")) {
            if (thread.startsWith("\"walhook-routing") || thread.startsWith("\"walhook-replication")) {
                String[] lines = thread.split("\n");
                threads.append(String.join(" | ", java.util.Arrays.copyOfRange(lines, 0, Math.min(lines.length, 14))))
                        .append(" || ");
            }
        }
        return threads.length() == 0 ? "no pipeline threads" : threads.toString();
    }

    /** The delivery gauges (memory held by undelivered events, requests under way), from /q/metrics. */
    private String deliveryGauges() {
        try {
            return String.join(" ", api().get("/q/metrics").text().lines()
                    .filter(line -> line.startsWith("walhook_delivery_memory") || line.startsWith("walhook_delivery_in_flight"))
                    .toList());
        } catch (Exception e) {
            return "no gauges: " + e;
        }
    }

    /** Runs one seed for this long (plus setting up and settling) and reports what it found. */
    public static Report run(long seed, Duration duration, PrintStream log) throws Exception {
        return new TortureRun(seed, duration, log).run();
    }

    private Report run() throws Exception {
        Instant started = Instant.now();
        say("seed " + seed + ": " + duration.toSeconds() + " s of faults (replay: ./scripts/torture --seed " + seed
                + " --seconds " + duration.toSeconds() + ")");
        pg = EmbeddedPostgres.builder().setting("logical_decoding_work_mem", "64kB").setting("wal_sender_timeout", "20s")
                .start();
        Workload workload;
        try (Observed receivers = new Observed(REQUEST_TIMEOUT.toMillis())) {
            observed = receivers;
            observed.hooksCredentials("sig=" + querySecret, "x-api-key", headerValue, hooksSecret);
            database = pg.createDatabase("torture");
            Workload.createSchema(pg, database);
            pg.execute(database, "CREATE TABLE probe (id int PRIMARY KEY, w bigint)");
            configure();
            startWalhook();
            createSubscriptions();
            workload = new Workload(pg, database, random, ledger);
            Instant end = Instant.now().plus(duration);
            while (Instant.now().isBefore(end)) {
                watchProcess();
                workload.step();
                if (random.nextInt(60) == 0) {
                    try {
                        act();
                    } catch (Exception | AssertionError e) {
                        // not an invariant: an action the harness could not finish (an API call timed out, say)
                        count("action not finished (" + e.getClass().getSimpleName() + ")");
                        say("an action was not finished: " + e);
                    }
                }
                pace(random.nextInt(20));
            }
            say("faults stop; settling");
            settle(workload);
            if (!missing().isEmpty()) {
                // what walhook says of it, for the report
                try {
                    violations.add("(not settled; /status: " + api().get("/status").text() + "; subscriptions "
                            + storedSubscriptions() + "; " + deliveryGauges() + "; " + pipelineThreads() + ")");
                } catch (Exception e) {
                    violations.add("(not settled; no /status: " + e + ")");
                }
            }
            boolean quiet = missing().isEmpty() && quiesce();
            check();
            checkBackfillsEnded(workload.hotRekeyed());
            if (quiet) {
                List<Observed.Arrival> arrivals = observed.arrivals();
                for (String subscription : List.of("hooks", "single", "queue")) {
                    checkLatest(subscription, arrivals.stream().filter(a -> a.subscription().equals(subscription)).toList());
                }
                checkBackfillsComplete();
            } else {
                count("last arrivals per row not checked (not quiet)");
                say("not quiet: the last arrivals per row are not checked");
            }
            if (walhook != null) {
                exposed.append(walhook.output());
                walhook.close();
            }
            checkExposure();
            int changes = ledger.transactions().stream().filter(tx -> tx.outcome == Ledger.Outcome.COMMITTED)
                    .mapToInt(tx -> tx.changes.size()).sum();
            Map<String, Integer> deliveries = new TreeMap<>();
            observed.arrivals().forEach(a -> deliveries.merge(a.subscription(), 1, Integer::sum));
            Report report = new Report(seed, Duration.between(started, Instant.now()), workload.transactions, changes,
                    deliveries, actions, List.copyOf(violations));
            say(report.summary());
            return report;
        } finally {
            if (walhook != null) {
                walhook.close();
            }
            if (proxy != null) {
                proxy.close();
            }
            pg.stop();
        }
    }

    private void configure() {
        proxy = TcpProxy.to(pg.host(), pg.port());
        env.put("WALHOOK_SOURCE_URL", pg.sourceUrl(database).replace(":" + pg.port() + "/", ":" + proxy.port() + "/"));
        env.put("WALHOOK_SLOT", "torture");
        env.put("WALHOOK_API_TOKEN", TOKEN);
        env.put("WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true");
        env.put("WALHOOK_AMQP_URL", observed.amqpUrl());
        env.put("WALHOOK_DELIVERY_REQUEST_TIMEOUT", REQUEST_TIMEOUT.toMillis() + "ms");
        env.put("WALHOOK_DELIVERY_MAX_BACKOFF", "2s");
        env.put("WALHOOK_DELIVERY_PARKED_RETRY_INTERVAL", "5s");
        env.put("WALHOOK_DELIVERY_RETRY_WINDOW", random.nextBoolean() ? "3s" : "30s");
        env.put("WALHOOK_SHUTDOWN_GRACE_PERIOD", "3s");
        env.put("WALHOOK_SOURCE_STATUS_INTERVAL", "2s");
        env.put("WALHOOK_SOURCE_RECONNECT_MAX_BACKOFF", "2s");
        env.put("WALHOOK_SOURCE_HANDOFF_CAPACITY", Integer.toString(200 + random.nextInt(2000)));
        env.put("WALHOOK_SUBSCRIPTIONS_SINGLE_URL", observed.url("/single"));
        env.put("WALHOOK_SUBSCRIPTIONS_SINGLE_TABLES", "public.hot,public.toast,public.trunc");
        env.put("WALHOOK_SUBSCRIPTIONS_SINGLE_FORMAT", "cloudevents");
        env.put("WALHOOK_SUBSCRIPTIONS_SINGLE_SECRET", singleSecret);
        env.put("WALHOOK_SUBSCRIPTIONS_QUEUE_AMQP_ADDRESS", "torture.{table}");
        env.put("WALHOOK_SUBSCRIPTIONS_QUEUE_TABLES", "public.hot,public.bulk");
        concurrency();
    }

    private void concurrency() {
        env.put("WALHOOK_DELIVERY_CONCURRENCY", Integer.toString(List.of(1, 2, 4, 8).get(random.nextInt(4))));
    }

    private void startWalhook() throws InterruptedException {
        walhook = WalhookProcess.start(env, "384m");
        walhook.awaitReady(Duration.ofSeconds(120));
    }

    private ApiClient api() throws InterruptedException {
        if (!walhook.isAlive()) {
            watchProcess();
        }
        walhook.awaitReady(Duration.ofSeconds(120));
        return new ApiClient(walhook, TOKEN);
    }

    private String hooks(int batch) {
        return "{\"name\": \"" + (hooksVersion % 2 == 0 ? "hooks" : "hooks-renamed") + "\", \"tables\": [\"*\"],"
                + " \"batch\": {\"max_events\": " + batch + ", \"max_wait_ms\": 20}, \"destination\": {\"type\": \"webhook\","
                + " \"url\": \"" + observed.url("/hooks/" + hooksVersion) + "?sig=" + querySecret + "\", \"secret\": \""
                + hooksSecret + "\", \"headers\": {\"x-api-key\": \"" + headerValue + "\"}}}";
    }

    private static String eph() {
        return "{\"name\": \"eph\", \"tables\": [\"public.hot\"], \"destination\": {\"type\": \"webhook\", \"url\": \"%s\"}}";
    }

    private void createSubscriptions() throws Exception {
        ApiClient api = api();
        hooksId = create(api, hooks(10));
        ephId = create(api, eph().formatted(observed.url("/eph/0")));
        // from the next transaction walhook reads: wait until one reaches the new subscription
        Instant deadline = Instant.now().plus(Duration.ofSeconds(60));
        int probe = 0;
        while (observed.arrivals().stream().noneMatch(a -> a.subscription().equals("hooks") && a.token().equals("w-1"))) {
            if (Instant.now().isAfter(deadline)) {
                throw new IllegalStateException("the new subscription got nothing within 60 s:\n" + walhook.output());
            }
            pg.execute(database, "INSERT INTO probe VALUES (" + (++probe) + ", -1)");
            pace(500);
        }
    }

    /** One fault or mutation, chosen from the seed. */
    private void act() throws Exception {
        int pick = random.nextInt(100);
        if (pick < 12) {
            count("kill -9");
            exposed.append(walhook.output());
            walhook.close();
            checkAcknowledged("after kill -9");
            walhook = WalhookProcess.start(env, "384m");
        } else if (pick < 19) {
            count("SIGTERM");
            stopGracefully(false);
        } else if (pick < 24) {
            count("restart with another lane count");
            stopGracefully(true);
        } else if (pick < 31) {
            if (random.nextInt(100) < 40) {
                count("PostgreSQL crash and restart");
                pg.crashAndRestart();
            } else {
                count("PostgreSQL restart");
                try {
                    pg.restart();
                } catch (io.walhook.testing.HarnessException e) {
                    // a fast stop waits for the walsender, which waits for walhook to confirm: crash it instead
                    count("PostgreSQL fast stop timed out");
                    pg.crashAndRestart();
                }
            }
        } else if (pick < 33) {
            // a failover to a server at the same address that left walhook's connections half-open
            count("connections left half-open");
            proxy.loseServerOfAll();
        } else if (pick < 37) {
            count("walsender terminated");
            try {
                pg.execute(database, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
                        + " WHERE slot_name = 'torture' AND active_pid IS NOT NULL");
            } catch (SQLException e) {
                // the server restarts: nothing to terminate
            }
        } else if (pick < 57) {
            receiverFault();
        } else if (pick < 64) {
            if (random.nextBoolean()) {
                count("AMQP peer restart");
                observed.restartAmqp();
            } else {
                int percent = List.of(0, 0, 20, 50).get(random.nextInt(4));
                count("AMQP rejects " + percent + "%");
                observed.amqpRejects(percent);
            }
        } else if (pick < 80) {
            mutateHooks();
        } else if (pick < 93) {
            backfillHooks(api());
        } else {
            mutateEph();
        }
    }

    private void stopGracefully(boolean newLaneCount) throws InterruptedException, SQLException {
        // a JVM told to stop before walhook installed its handler exits 143; once ready, walhook exits 0
        boolean ready = walhook.status("/q/health/ready") == 200;
        walhook.terminate();
        try {
            int status = walhook.awaitExit(Duration.ofSeconds(60));
            if (status != 0 && (ready || status != 143)) {
                violations.add("SIGTERM: walhook exited with " + status + " (not 0)" + (ready ? " although it was ready" : ""));
            }
        } catch (AssertionError e) {
            // a stop that hangs breaks an invariant (an orchestrator kills it): what each thread waited on, then kill -9
            violations.add("SIGTERM: walhook did not exit within 60 s; its threads:\n" + walhook.threadDump());
        }
        exposed.append(walhook.output());
        walhook.close();
        checkAcknowledged("after SIGTERM");
        if (newLaneCount) {
            concurrency();
        }
        walhook = WalhookProcess.start(env, "384m");
    }

    private void receiverFault() {
        String target = List.of("/hooks", "/single", "/eph", "/").get(random.nextInt(4));
        String prefix = target.equals("/") ? null : target;
        Observed.Behaviour behaviour = switch (random.nextInt(7)) {
            case 0 -> Observed.Behaviour.HEALTHY;
            case 1 -> new Observed.Behaviour(prefix, 10 + random.nextInt(40), 500, null, 0, 0, false);
            case 2 -> new Observed.Behaviour(prefix, 100, 503, null, 0, 0, false);
            case 3 -> new Observed.Behaviour(prefix, 30, random.nextBoolean() ? 429 : 503,
                    List.of("0", "-1", "soon", "99999999999999999", "1", "Wed, 21 Oct 2015 07:28:00 GMT").get(random.nextInt(6)),
                    0, 0, false);
            case 4 -> new Observed.Behaviour(prefix, 0, 204, null, 20 + random.nextInt(30), 1500, false);
            case 5 -> new Observed.Behaviour(prefix, 0, 204, null, 100, 3000, false);
            default -> new Observed.Behaviour(prefix == null ? "/hooks" : prefix, 0, 204, null, 0, 0, true);
        };
        count("receiver " + describe(behaviour));
        observed.behave(behaviour);
    }

    private static String describe(Observed.Behaviour b) {
        String who = b.prefix() == null ? "all" : b.prefix();
        if (b.goneOnce()) {
            return who + " 410 once";
        }
        if (b.slowPercent() > 0) {
            return who + (b.slowPercent() == 100 ? " hangs" : " slow");
        }
        if (b.failPercent() == 0) {
            return "healthy";
        }
        return who + " fails " + b.failPercent() + "%" + (b.retryAfter() == null ? "" : " with Retry-After");
    }

    private void mutateHooks() throws Exception {
        ApiClient api = api();
        switch (random.nextInt(6)) {
            case 0 -> {
                int batch = List.of(1, 5, 50).get(random.nextInt(3));
                if (random.nextBoolean()) {
                    // what it leaves out (the secret, the URL's query, the header value) stays: the receiver checks all three
                    count("PATCH hooks batch size");
                    answer("PATCH batch", api.patch("/subscriptions/" + hooksId, "{\"batch\": {\"max_events\": " + batch
                            + "}}"));
                } else {
                    count("PUT hooks batch size");
                    answer("PUT batch", api.put("/subscriptions/" + hooksId, hooks(batch)));
                }
            }
            case 1 -> {
                count("PUT hooks destination and name");
                hooksVersion++;
                answer("PUT destination", api.put("/subscriptions/" + hooksId, hooks(1 + random.nextInt(20))));
            }
            case 2 -> {
                count("pause hooks");
                answer("pause", api.post("/subscriptions/" + hooksId + "/pause", null));
            }
            case 3 -> {
                count("resume hooks");
                answer("resume", api.post("/subscriptions/" + hooksId + "/resume", null));
            }
            case 4 -> {
                count("replay hooks");
                answer("replay", api.post("/subscriptions/" + hooksId + "/dead-letters/replay", null));
            }
            default -> {
                count("read hooks views");
                answer("GET", api.get("/subscriptions/" + hooksId));
                answer("GET list", api.get("/subscriptions"));
                answer("GET configured", api.get("/subscriptions/config:single"));
                answer("GET dead letters", api.get("/subscriptions/" + hooksId + "/dead-letters?limit=5"));
                answer("GET status", api.get("/status"));
            }
        }
    }

    /** Starts a backfill of hooks, or pauses, resumes or cancels the last one. */
    private void backfillHooks(ApiClient api) throws Exception {
        int pick = random.nextInt(10);
        if (backfills.isEmpty() || pick < 5) {
            List<String> tables = random.nextBoolean() ? List.of("public.hot") : List.of("public.hot", "public.toast");
            // small chunks, some spread over seconds: many watermark windows for changes to fall in, and faults
            int chunk = List.of(1, 3, 17, 1000).get(random.nextInt(4));
            String rate = List.of("", ", \"max_rows_per_second\": 20", ", \"max_rows_per_second\": 100").get(random.nextInt(3));
            long before = ledger.ordinals();
            ApiClient.Answer started = api.post("/subscriptions/" + hooksId + "/backfills", "{\"tables\": "
                    + JSON.writeValueAsString(tables) + ", \"chunk_size\": " + chunk + rate + "}");
            answer("POST backfill", started);
            if (started.status() == 202) {
                count("backfill hooks");
                backfills.add(new BackfillRun(started.body().get("id").asText(), tables, before));
            } else {
                count("backfill not started (" + started.status() + ")");
            }
            return;
        }
        String last = "/subscriptions/" + hooksId + "/backfills/" + backfills.get(backfills.size() - 1).id();
        String verb = pick < 7 ? "pause" : pick < 9 ? "resume" : "cancel";
        count(verb + " backfill");
        if (verb.equals("cancel")) {
            cancelAsked.add(backfills.get(backfills.size() - 1).id());
        }
        answer(verb + " backfill", api.post(last + "/" + verb, null));
    }

    /** The state of each backfill of hooks, by id, as the API says (paused ones resumed first, when asked to). */
    private Map<String, JsonNode> backfillStates(boolean resume) throws Exception {
        ApiClient api = api();
        Map<String, JsonNode> states = new LinkedHashMap<>();
        for (BackfillRun run : backfills) {
            String path = "/subscriptions/" + hooksId + "/backfills/" + run.id();
            JsonNode state = null;
            try {
                ApiClient.Answer answer = api.get(path);
                answer("GET backfill", answer);
                if (resume && answer.body() != null && "paused".equals(answer.body().path("state").asText())) {
                    answer("resume backfill", api.post(path + "/resume", null));
                    answer = api.get(path);
                }
                state = answer.status() == 200 ? answer.body() : null;
            } catch (java.io.IOException e) {
                say("backfill state not answered: " + e); // walhook restarting, or slow: not known this time
            }
            states.put(run.id(), state);
        }
        return states;
    }

    private static boolean ended(Map<String, JsonNode> states) {
        return states.values().stream().allMatch(state -> state != null
                && List.of("done", "cancelled", "failed").contains(state.path("state").asText()));
    }

    private void mutateEph() throws Exception {
        ApiClient api = api();
        if (random.nextBoolean()) {
            count("delete and recreate eph");
            answer("DELETE", api.delete("/subscriptions/" + ephId));
            ephId = create(api, eph().formatted(observed.url("/eph/" + random.nextInt(1000))));
        } else {
            count("drop eph dead letters");
            answer("DELETE dead letters", api.delete("/subscriptions/" + ephId + "/dead-letters"));
        }
    }

    private String create(ApiClient api, String body) throws Exception {
        ApiClient.Answer created = api.post("/subscriptions", body);
        answer("POST", created);
        if (created.status() != 201) {
            throw new IllegalStateException("subscription not created: " + created.status() + " " + created.text());
        }
        return created.body().get("id").asText();
    }

    /** Keeps an API answer for the exposure check; a 5xx other than 503 (the database restarting) breaks an invariant. */
    private int answer(String what, ApiClient.Answer answer) {
        exposed.append(answer.text()).append('\n');
        if (answer.status() >= 500 && answer.status() != 503) {
            violations.add("API " + what + " answered " + answer.status() + ": " + answer.text());
        }
        return answer.status();
    }

    /** A walhook that exited without being told to breaks an invariant; it is started again. */
    private void watchProcess() throws InterruptedException {
        if (walhook != null && !walhook.isAlive()) {
            String output = walhook.output();
            exposed.append(output);
            String[] lines = output.split("\n");
            violations.add("walhook exited by itself; its last lines:\n    "
                    + String.join("\n    ", java.util.Arrays.copyOfRange(lines, Math.max(0, lines.length - 8), lines.length)));
            walhook.close();
            walhook = WalhookProcess.start(env, "384m");
        }
    }

    /**
     * With walhook stopped: every committed change at or before the slot's confirmed position was
     * delivered or is in the durable queue, for every subscription that wants it.
     */
    private void checkAcknowledged(String when) throws SQLException {
        long confirmed;
        Map<String, Set<String>> queued = new HashMap<>();
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            try (ResultSet rs = s.executeQuery("SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots"
                    + " WHERE slot_name = 'torture'")) {
                if (!rs.next()) {
                    violations.add(when + ": the slot is gone");
                    return;
                }
                confirmed = rs.getLong(1);
            }
            try (ResultSet rs = s.executeQuery("SELECT subscription_id, body FROM walhook.parked_event")) {
                while (rs.next()) {
                    String subscription = rs.getString(1);
                    String name = subscription.equals(hooksId) ? "hooks" : subscription.replace("config:", "");
                    try {
                        List<JsonNode> events = new ArrayList<>();
                        Observed.collect(JSON.readTree(rs.getBytes(2)), events);
                        for (JsonNode event : events) {
                            Observed.Arrival arrival = Observed.arrival(name, event, Long.MAX_VALUE);
                            if (!arrival.read()) {
                                queued.computeIfAbsent(name, k -> new HashSet<>()).add(arrival.token());
                            }
                        }
                    } catch (java.io.IOException e) {
                        violations.add(when + ": a durable queue row of " + name + " is not JSON: " + e.getMessage());
                    }
                }
            }
        } catch (SQLException e) {
            return; // the server is restarting: no check this time
        }
        Map<String, Set<String>> delivered = delivered();
        count("acknowledgement checked");
        int missing = 0;
        List<String> examples = new ArrayList<>();
        for (Ledger.Tx tx : ledger.transactions()) {
            if (tx.outcome != Ledger.Outcome.COMMITTED || tx.lsnAfter < 0 || tx.lsnAfter > confirmed) {
                continue;
            }
            for (Ledger.Change change : tx.changes) {
                for (String subscription : wanting(change)) {
                    if (!delivered.getOrDefault(subscription, Set.of()).contains(change.token())
                            && !queued.getOrDefault(subscription, Set.of()).contains(change.token())) {
                        missing++;
                        if (examples.size() < 5) {
                            examples.add(subscription + " " + change.token());
                        }
                    }
                }
            }
        }
        if (missing > 0) {
            violations.add(when + " walhook pid " + walhook.pid() + " at " + Instant.now() + ": the slot confirmed "
                    + lsn(confirmed) + " past " + missing + " changes neither delivered nor queued, e.g. " + examples
                    + "; queued per subscription " + queuedCounts(queued) + ", subscriptions " + storedSubscriptions());
        }
    }

    private static Map<String, Integer> queuedCounts(Map<String, Set<String>> queued) {
        Map<String, Integer> counts = new TreeMap<>();
        queued.forEach((name, tokens) -> counts.put(name, tokens.size()));
        return counts;
    }

    /** The API's subscriptions as the state table holds them (for a report that needs them). */
    private String storedSubscriptions() {
        try (Connection c = pg.connect(database); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT id, name, paused FROM walhook.subscription ORDER BY id")) {
            List<String> rows = new ArrayList<>();
            while (rs.next()) {
                rows.add(rs.getString(1) + " " + rs.getString(2) + (rs.getBoolean(3) ? " paused" : ""));
            }
            return rows.toString();
        } catch (SQLException e) {
            return "(" + e.getMessage() + ")";
        }
    }

    /** The subscriptions whose every change must arrive: hooks (every table, messages), single and queue. */
    private static List<String> wanting(Ledger.Change change) {
        String table = change.table();
        List<String> wanting = new ArrayList<>(List.of("hooks"));
        if ("hot".equals(table) || "toast".equals(table) || "trunc".equals(table)) {
            wanting.add("single");
        }
        if ("hot".equals(table) || "bulk".equals(table)) {
            wanting.add("queue");
        }
        return wanting;
    }

    private Map<String, Set<String>> delivered() {
        Map<String, Set<String>> delivered = new HashMap<>();
        for (Observed.Arrival a : observed.arrivals()) {
            if (!a.read()) { // a backfill's read of a row's value is not the change that wrote it
                delivered.computeIfAbsent(a.subscription(), k -> new HashSet<>()).add(a.token());
            }
        }
        return delivered;
    }

    /** Faults off, prepared transactions finished, paused and disabled subscriptions resumed, until everything arrived. */
    private void settle(Workload workload) throws Exception {
        observed.behave(Observed.Behaviour.HEALTHY);
        observed.amqpRejects(0);
        workload.finish();
        watchProcess();
        ApiClient api = api();
        // resumed whether or not a pause's answer was seen
        answer("resume", api.post("/subscriptions/" + hooksId + "/resume", null));
        resolveUnknown();
        Instant deadline = Instant.now().plus(SETTLE);
        Instant nextReplay = Instant.now();
        while (Instant.now().isBefore(deadline) && (!missing().isEmpty() || !ended(backfillStates(true)))) {
            watchProcess();
            if (Instant.now().isAfter(nextReplay)) {
                // a 410 disabled it, or events wait in the durable queue on a long backoff: replay
                try {
                    for (String id : List.of(hooksId, "config:single")) {
                        answer("replay", api().post("/subscriptions/" + id + "/dead-letters/replay", null));
                    }
                } catch (java.io.IOException e) {
                    say("replay not answered: " + e);
                }
                nextReplay = Instant.now().plusSeconds(10);
            }
            pace(250);
        }
    }

    /** Transactions whose commit's answer was lost and not yet resolved: the server says what became of them. */
    private void resolveUnknown() throws SQLException {
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            for (Ledger.Tx tx : ledger.transactions()) {
                if (tx.outcome == Ledger.Outcome.UNKNOWN && tx.transactional) {
                    try (ResultSet rs = s.executeQuery("SELECT txid_status(" + tx.xid + ")")) {
                        rs.next();
                        String status = rs.getString(1);
                        if ("committed".equals(status) || "aborted".equals(status)) {
                            ledger.resolved(tx, "committed".equals(status), -1);
                        }
                    }
                }
            }
        }
    }

    /** Required changes not delivered, per subscription. */
    private Map<String, List<String>> missing() {
        Map<String, Set<String>> delivered = delivered();
        Map<String, List<String>> missing = new TreeMap<>();
        for (Ledger.Tx tx : ledger.transactions()) {
            if (tx.outcome != Ledger.Outcome.COMMITTED) {
                continue;
            }
            for (Ledger.Change change : tx.changes) {
                for (String subscription : wanting(change)) {
                    if (!delivered.getOrDefault(subscription, Set.of()).contains(change.token())) {
                        missing.computeIfAbsent(subscription, k -> new ArrayList<>()).add(change.token());
                    }
                }
            }
        }
        return missing;
    }

    private void check() {
        missing().forEach((subscription, tokens) -> violations.add(subscription + ": " + tokens.size()
                + " committed changes never delivered, e.g. " + tokens.subList(0, Math.min(8, tokens.size()))));
        List<Observed.Arrival> arrivals = observed.arrivals();
        observed.malformed().forEach(m -> violations.add("malformed delivery: " + m));
        Map<String, Set<String>> idsOfToken = new HashMap<>();
        Map<String, Set<String>> tokensOfId = new HashMap<>();
        Map<String, List<Observed.Arrival>> firsts = new HashMap<>();
        Set<String> seen = new HashSet<>();
        int aborted = 0;
        List<String> abortedExamples = new ArrayList<>();
        Map<String, Set<String>> keysOfReadId = new HashMap<>();
        Map<String, Set<String>> idsOfRead = new HashMap<>();
        for (Observed.Arrival a : arrivals) {
            if (a.read()) {
                checkRead(a, keysOfReadId, idsOfRead);
                continue;
            }
            if (a.token().equals("w-1")) {
                if (!a.subscription().equals("hooks")) {
                    violations.add(a.subscription() + " got the probe row, which it does not want");
                }
                continue; // the probe
            }
            idsOfToken.computeIfAbsent(a.token(), k -> new HashSet<>()).add(a.id());
            tokensOfId.computeIfAbsent(a.id(), k -> new HashSet<>()).add(a.token());
            Ledger.Change change = ledger.change(a.token());
            Ledger.Tx tx = ledger.txOf(a.token());
            if (change == null || tx.outcome == Ledger.Outcome.ABORTED || tx.outcome == Ledger.Outcome.OPEN
                    || ledger.undone(a.token())) {
                aborted++;
                if (abortedExamples.size() < 5) {
                    abortedExamples.add(a.subscription() + " " + a.token() + " (" + (change == null ? "never written"
                            : ledger.undone(a.token()) ? "a rolled-back savepoint" : tx.outcome) + ")");
                }
                continue;
            }
            if (!wanting(change).contains(a.subscription()) && !(a.subscription().equals("eph") && "hot".equals(change.table()))) {
                violations.add(a.subscription() + " got " + a.token() + " of " + change.table() + ", which it does not want");
            }
            if (!change.op().equals(a.op()) || !java.util.Objects.equals(change.table(), a.table())) {
                violations.add(a.subscription() + " " + a.token() + " arrived as " + a.op() + " of " + a.table() + ", written as "
                        + change.op() + " of " + change.table());
            }
            if (Ledger.UNCHANGED.equals(change.big())) {
                if (a.bigPresent() || !a.bigUnchanged()) {
                    violations.add(a.subscription() + " " + a.token() + ": an unchanged TOASTed value arrived "
                            + (a.bigPresent() ? "as a value" : "without being listed in unchanged"));
                }
            } else if (change.big() != null && (!a.bigPresent() || !change.big().equals(a.big()))) {
                violations.add(a.subscription() + " " + a.token() + ": the TOASTed value arrived "
                        + (a.bigPresent() ? "different (" + (a.big() == null ? "null" : a.big().length() + " chars") + ", "
                        + change.big().length() + " written)" : "missing"));
            }
            if (seen.add(a.subscription() + " " + a.token())) {
                firsts.computeIfAbsent(a.subscription(), k -> new ArrayList<>()).add(a);
            }
        }
        if (aborted > 0) {
            violations.add(aborted + " deliveries of changes that were never committed, e.g. " + abortedExamples);
        }
        atMostOne(idsOfToken, "change %s arrived under %d ids: %s");
        atMostOne(tokensOfId, "id %s carried %d changes: %s");
        atMostOne(idsOfRead, "backfill row %s was read under %d ids: %s");
        atMostOne(keysOfReadId, "read event id %s carried %d rows: %s");
        keysOfReadId.keySet().stream().filter(tokensOfId::containsKey).forEach(id -> violations.add("read event id " + id
                + " is also a change's id: " + tokensOfId.get(id)));
        for (String subscription : List.of("hooks", "single", "queue")) {
            checkOrder(subscription, firsts.getOrDefault(subscription, List.of()));
        }
        checkReads(arrivals.stream().filter(a -> a.subscription().equals("hooks")).toList());
    }

    /** One value per key, or a violation naming the key, how many values and which ({@code what}'s three places). */
    private void atMostOne(Map<String, Set<String>> values, String what) {
        values.forEach((key, of) -> {
            if (of.size() > 1) {
                violations.add(String.format(Locale.ROOT, what, key, of.size(), of));
            }
        });
    }

    /**
     * A backfill's read event: of hooks (the only subscription backfilled), of a row version a
     * committed transaction wrote in the table it names, with that version's TOASTed value, and its
     * id the same row's in every attempt.
     */
    private void checkRead(Observed.Arrival a, Map<String, Set<String>> keysOfReadId, Map<String, Set<String>> idsOfRead) {
        Ledger.Change change = ledger.change(a.token());
        Ledger.Tx tx = ledger.txOf(a.token());
        if (!a.subscription().equals("hooks")) {
            violations.add(a.subscription() + " got a read event of backfill " + a.backfill() + ", run for hooks only");
        } else if (change == null || tx.outcome != Ledger.Outcome.COMMITTED || ledger.undone(a.token())) {
            violations.add("backfill " + a.backfill() + " read " + a.token() + ", a value never committed ("
                    + (change == null ? "never written" : ledger.undone(a.token()) ? "a rolled-back savepoint" : tx.outcome) + ")");
        } else if (!change.table().equals(a.table()) || change.key() == null) {
            violations.add("backfill " + a.backfill() + " read " + a.token() + " as a row of " + a.table() + ", written to "
                    + change.table());
        } else {
            if (change.big() != null && !Ledger.UNCHANGED.equals(change.big())
                    && (!a.bigPresent() || !change.big().equals(a.big()))) {
                violations.add("backfill " + a.backfill() + " read " + a.token() + " with a TOASTed value "
                        + (a.bigPresent() ? "different from the one written" : "missing"));
            }
            keysOfReadId.computeIfAbsent(a.id(), k -> new HashSet<>()).add(change.key());
            idsOfRead.computeIfAbsent(a.backfill() + " " + change.key(), k -> new HashSet<>()).add(a.id());
        }
    }

    /**
     * Where an arrival's change stands in commit order (its transaction's place, then its own in it);
     * null for a change without a row key (a truncate, a message) or one that was never committed.
     */
    private long[] commitOrder(Observed.Arrival a) {
        Ledger.Change change = ledger.change(a.token());
        Ledger.Tx tx = ledger.txOf(a.token());
        if (change == null || change.key() == null || tx.outcome != Ledger.Outcome.COMMITTED || ledger.undone(a.token())) {
            return null;
        }
        return new long[] {tx.ordinal, change.index()};
    }

    /**
     * No read event arrives after a newer change of its row did (DBLog's promise: a read never
     * carries a value older than one already delivered), but for an attempt walhook gave up on that
     * landed late (made before the newer change's attempt; see {@link #checkLatest}), and for a read
     * delivered again, at least once, with the newer change delivered again after it (a request of
     * the durable queue sent again after a restart, the read and its row's next change in it).
     */
    private void checkReads(List<Observed.Arrival> arrivals) {
        Map<String, long[]> newestOrder = new HashMap<>();
        Map<String, Observed.Arrival> newest = new HashMap<>();
        Set<String> readsSeen = new HashSet<>();
        /* per row: a read that arrived again behind a newer change, excused once that change (or a newer) arrives again */
        Map<String, Observed.Arrival> again = new HashMap<>();
        int stale = 0;
        List<String> examples = new ArrayList<>();
        for (Observed.Arrival a : arrivals) {
            long[] order = commitOrder(a);
            if (order == null) {
                continue;
            }
            Ledger.Change change = ledger.change(a.token());
            long[] known = newestOrder.get(change.key());
            boolean older = known != null && (known[0] > order[0] || known[0] == order[0] && known[1] > order[1]);
            boolean repeated = a.read() && !readsSeen.add(a.id() + " " + a.token());
            if (!older) {
                again.remove(change.key()); // a version at least as new arrived after it: the row is right again
            }
            if (a.read() && older && a.sentAt() >= newest.get(change.key()).sentAt()) {
                if (repeated) {
                    again.putIfAbsent(change.key(), a);
                } else {
                    stale++;
                    if (examples.size() < 5) {
                        examples.add(change.key() + ": backfill " + a.backfill() + " read " + a.token() + " after "
                                + newest.get(change.key()).token() + " arrived");
                    }
                }
            }
            if (!older) {
                newestOrder.put(change.key(), order);
                newest.put(change.key(), a);
            }
        }
        for (Map.Entry<String, Observed.Arrival> left : again.entrySet()) {
            stale++;
            if (examples.size() < 5) {
                examples.add(left.getKey() + ": backfill " + left.getValue().backfill() + " read " + left.getValue().token()
                        + " again after " + newest.get(left.getKey()).token() + " arrived, which never came again");
            }
        }
        if (stale > 0) {
            violations.add("hooks: " + stale + " read events older than a change of their row that arrived before them, e.g. "
                    + examples);
        }
    }

    /** The backfills' states, asked until each is answered (a few times at most: walhook may be restarting). */
    private Map<String, JsonNode> answeredBackfillStates() throws Exception {
        Map<String, JsonNode> states = backfillStates(false);
        for (int tries = 0; tries < 5 && states.containsValue(null); tries++) {
            pace(2000);
            states = backfillStates(false);
        }
        return states;
    }

    /**
     * Every backfill ended, done, or cancelled when the run asked; one that failed, or was cancelled
     * unasked, breaks an invariant. The workload's ALTER TABLE adds columns, which a backfill reads
     * on with, and changes hot's replica identity, which fails a backfill of it as documented: that
     * failure, and only it, is expected once the workload changed it.
     */
    private void checkBackfillsEnded(boolean hotRekeyed) throws Exception {
        Map<String, JsonNode> states = answeredBackfillStates();
        for (BackfillRun run : backfills) {
            JsonNode state = states.get(run.id());
            String named = state == null ? "unknown" : state.path("state").asText();
            boolean rekeyedUnder = named.equals("failed") && hotRekeyed
                    && (state.path("error").asText().startsWith("table public.hot was altered during the backfill")
                            || state.path("error").asText().startsWith("table public.hot's key changed since"));
            if (rekeyedUnder) {
                count("backfill failed: hot's replica identity changed under it");
            } else if (!named.equals("done") && !(named.equals("cancelled") && cancelAsked.contains(run.id()))) {
                violations.add("backfill " + run.id() + " of " + run.tables() + " ended " + named
                        + (named.equals("cancelled") ? " unasked" : "") + ": " + state);
            }
        }
    }

    /**
     * A done backfill sent every row of its tables that existed, unchanged, for as long as it ran:
     * each row whose last change was committed before the backfill began.
     */
    private void checkBackfillsComplete() throws Exception {
        Map<String, JsonNode> states = answeredBackfillStates();
        Map<String, Set<String>> readKeys = new HashMap<>();
        for (Observed.Arrival a : observed.arrivals()) {
            Ledger.Change change = ledger.change(a.token());
            if (a.read() && change != null && change.key() != null) {
                readKeys.computeIfAbsent(a.backfill(), k -> new HashSet<>()).add(change.key());
            }
        }
        for (BackfillRun run : backfills) {
            JsonNode state = states.get(run.id());
            if (state == null || !state.path("state").asText().equals("done")) {
                continue; // checkBackfillsEnded says why
            }
            int unsent = 0;
            List<String> examples = new ArrayList<>();
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                for (String table : run.tables()) {
                    try (ResultSet rs = s.executeQuery("SELECT w FROM " + table)) {
                        while (rs.next()) {
                            String token = "w" + rs.getLong(1);
                            Ledger.Change change = ledger.change(token);
                            Ledger.Tx tx = ledger.txOf(token);
                            if (change == null || tx.ordinal < 0 || tx.ordinal > run.startedAfter()) {
                                continue; // changed since the backfill began: the stream's to send
                            }
                            if (!readKeys.getOrDefault(run.id(), Set.of()).contains(change.key())) {
                                unsent++;
                                if (examples.size() < 5) {
                                    examples.add(change.key() + " (" + token + ")");
                                }
                            }
                        }
                    }
                }
            }
            if (unsent > 0) {
                violations.add("backfill " + run.id() + " of " + run.tables() + " is done without sending " + unsent
                        + " rows that existed, unchanged, all along, e.g. " + examples);
            }
        }
    }

    /**
     * Everything acknowledged: the slot's confirmed position past the WAL written so far, and no
     * event of hooks, single or queue in the durable queue (a minute at most). Nothing is sent after
     * that but attempts walhook gave up on that land late.
     */
    private boolean quiesce() throws Exception {
        Instant deadline = Instant.now().plusSeconds(60);
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            long target;
            try (ResultSet rs = s.executeQuery("SELECT (pg_current_wal_lsn() - '0/0')::bigint")) {
                rs.next();
                target = rs.getLong(1);
            }
            while (Instant.now().isBefore(deadline)) {
                watchProcess();
                try (ResultSet rs = s.executeQuery("SELECT (SELECT (confirmed_flush_lsn - '0/0')::bigint FROM"
                        + " pg_replication_slots WHERE slot_name = 'torture'), (SELECT count(*) FROM walhook.parked_event"
                        + " WHERE subscription_id IN ('" + hooksId + "', 'config:single', 'config:queue'))")) {
                    rs.next();
                    if (rs.getLong(1) >= target && rs.getLong(2) == 0) {
                        return true;
                    }
                }
                pace(250);
            }
        }
        return false;
    }

    /**
     * Per row, the last arrival is the newest change that arrived: a receiver that applies events in
     * arrival order ends with the row as written. An older change may land after a newer one only
     * as an attempt walhook gave up on (a receiver slower than the request timeout): such an attempt
     * was made before the newer change's last one (its {@code webhook-timestamp}, in seconds, is
     * earlier: the newer change is sent only after a later attempt of the older one succeeded, at
     * least the request timeout of 1 s later). A resend of an older change after a newer one (a crash
     * replaying what was already delivered) is made after it, and is a violation.
     */
    private void checkLatest(String subscription, List<Observed.Arrival> arrivals) {
        Map<String, Observed.Arrival> last = new HashMap<>();
        Map<String, long[]> newestOrder = new HashMap<>();
        Map<String, Observed.Arrival> newest = new HashMap<>();
        for (Observed.Arrival a : arrivals) {
            long[] order = commitOrder(a);
            if (order == null) {
                continue;
            }
            Ledger.Change change = ledger.change(a.token());
            last.put(change.key(), a);
            long[] known = newestOrder.get(change.key());
            if (known == null || known[0] < order[0] || known[0] == order[0] && known[1] <= order[1]) {
                newestOrder.put(change.key(), order);
                newest.put(change.key(), a);
            }
        }
        List<String> examples = new ArrayList<>();
        int stale = 0;
        for (Map.Entry<String, Observed.Arrival> entry : last.entrySet()) {
            Observed.Arrival lastArrival = entry.getValue();
            Observed.Arrival newestArrival = newest.get(entry.getKey());
            if (!lastArrival.token().equals(newestArrival.token()) && lastArrival.sentAt() >= newestArrival.sentAt()) {
                stale++;
                if (examples.size() < 5) {
                    examples.add(entry.getKey() + ": " + lastArrival.token() + " arrived last, after " + newestArrival.token());
                }
            }
        }
        if (stale > 0) {
            violations.add(subscription + ": " + stale + " rows whose last arrival is an older change than one that"
                    + " arrived before it, e.g. " + examples);
        }
    }

    /** Per row, first deliveries in commit order; a truncate after every earlier change of its table and before every later one. */
    private void checkOrder(String subscription, List<Observed.Arrival> firsts) {
        Map<String, long[]> lastOfKey = new HashMap<>();
        int broken = 0;
        List<String> examples = new ArrayList<>();
        Map<String, Integer> position = new HashMap<>();
        for (int i = 0; i < firsts.size(); i++) {
            Observed.Arrival a = firsts.get(i);
            position.put(a.token(), i);
            Ledger.Change change = ledger.change(a.token());
            Ledger.Tx tx = ledger.txOf(a.token());
            if (change.key() == null || tx.outcome != Ledger.Outcome.COMMITTED) {
                continue; // a truncate (below), or a message whose emission's answer was lost
            }
            long[] order = {tx.ordinal, change.index()};
            long[] last = lastOfKey.put(change.key(), order);
            if (last != null && (last[0] > order[0] || last[0] == order[0] && last[1] > order[1])) {
                broken++;
                if (examples.size() < 5) {
                    examples.add(change.key() + ": " + a.token() + " (commit " + order[0] + ") after commit " + last[0]);
                }
            }
        }
        for (Ledger.Tx tx : ledger.transactions()) {
            for (Ledger.Change truncate : tx.changes) {
                if (!truncate.token().startsWith("T:") || !position.containsKey(truncate.token())) {
                    continue;
                }
                int at = position.get(truncate.token());
                for (Observed.Arrival a : firsts) {
                    Ledger.Change other = ledger.change(a.token());
                    Ledger.Tx otherTx = ledger.txOf(a.token());
                    if (other == truncate || !truncate.table().equals(other.table())) {
                        continue;
                    }
                    boolean before = otherTx.ordinal < tx.ordinal
                            || otherTx.ordinal == tx.ordinal && other.index() < truncate.index();
                    if (before != position.get(a.token()) < at) {
                        broken++;
                        if (examples.size() < 5) {
                            examples.add(a.token() + " arrived " + (before ? "after" : "before") + " the truncate "
                                    + truncate.token() + " it was committed " + (before ? "before" : "after"));
                        }
                    }
                }
            }
        }
        if (broken > 0) {
            violations.add(subscription + ": " + broken + " changes out of commit order, e.g. " + examples);
        }
    }

    private void checkExposure() {
        String text = exposed.toString();
        for (String secret : List.of(hooksSecret, singleSecret, headerValue, querySecret,
                hooksSecret.substring("whsec_".length()), singleSecret.substring("whsec_".length()))) {
            int at = text.indexOf(secret);
            if (at >= 0) {
                int from = text.lastIndexOf('\n', at) + 1;
                int to = text.indexOf('\n', at);
                violations.add("a secret or header value was exposed: "
                        + text.substring(from, to < 0 ? text.length() : to).replace(secret, "<SECRET>"));
            }
        }
    }

    private void count(String action) {
        actions.merge(action, 1, Integer::sum);
    }

    private void say(String line) {
        log.println("[torture] " + line);
    }

    private static String lsn(long value) {
        return Long.toHexString(value >>> 32).toUpperCase(Locale.ROOT) + "/" + Long.toHexString(value & 0xFFFFFFFFL)
                .toUpperCase(Locale.ROOT);
    }

    private static void pace(long millis) {
        if (millis <= 0) {
            return;
        }
        try {
            TimeUnit.MILLISECONDS.sleep(millis); // pacing of the workload: the seed decides how fast it writes
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * {@code --seed N} (or several: {@code --seeds N}, from {@code --seed} on), {@code --seconds S}
     * or {@code --minutes M} each; exits 1 when an invariant broke.
     */
    public static void main(String[] args) throws Exception {
        long seed = System.nanoTime() % 1_000_000;
        int seeds = 1;
        long seconds = 120;
        long total = 0;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--seed" -> seed = Long.parseLong(args[++i]);
                case "--seeds" -> seeds = Integer.parseInt(args[++i]);
                case "--seconds" -> seconds = Long.parseLong(args[++i]);
                case "--minutes" -> total = Long.parseLong(args[++i]) * 60;
                default -> {
                    System.err.println("usage: scripts/torture [--seed N] [--seeds K | --minutes M] [--seconds S per seed]");
                    System.exit(2);
                }
            }
        }
        List<Report> reports = new ArrayList<>();
        Instant end = Instant.now().plusSeconds(total);
        for (int i = 0; total > 0 ? Instant.now().isBefore(end) : i < seeds; i++) {
            try {
                reports.add(run(seed + i, Duration.ofSeconds(seconds), System.out));
            } catch (Exception | AssertionError e) {
                e.printStackTrace(System.out);
                reports.add(new Report(seed + i, Duration.ZERO, 0, 0, Map.of(), Map.of(), List.of("the run did not finish: " + e)));
            }
        }
        System.out.println();
        reports.forEach(r -> System.out.println(r.summary()));
        long broken = reports.stream().filter(r -> !r.ok()).count();
        System.out.printf(Locale.ROOT, "%d seeds, %d with broken invariants%n", reports.size(), broken);
        System.exit(broken == 0 ? 0 : 1);
    }
}
