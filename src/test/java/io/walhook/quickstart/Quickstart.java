package io.walhook.quickstart;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.WalhookProcess;
import io.walhook.testing.WebhookReceiver;

/**
 * The quick start behind {@code scripts/quickstart}: an embedded PostgreSQL with logical
 * replication, a local sink that prints what it receives, the packaged walhook between them,
 * and a few changes so the user sees them flow. Test scope only: nothing here ships in the
 * production artifact.
 */
public final class Quickstart {

    private static final List<String> CHANGES = List.of(
            "INSERT INTO orders (customer, status, amount) VALUES ('ada', 'new', 12.50)",
            "INSERT INTO orders (customer, status, amount) VALUES ('grace', 'new', 99.99), ('linus', 'new', 5)",
            "UPDATE orders SET status = 'paid' WHERE customer = 'ada'",
            "DELETE FROM orders WHERE customer = 'linus'",
            "SELECT pg_logical_emit_message(true, 'quickstart', 'hello from walhook''s quick start')",
            "UPDATE orders SET amount = amount * 2, status = 'paid' WHERE customer = 'grace'");

    /** The quick start's management API token: a demo value, printed with the rest of its configuration. */
    private static final String API_TOKEN = "quickstart-token";

    private Quickstart() {
    }

    public static void main(String[] args) throws Exception {
        Duration duration = null;
        int major = 17;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--duration" -> duration = Duration.ofSeconds(Long.parseLong(value(args, ++i, "--duration")));
                case "--pg" -> major = Integer.parseInt(value(args, ++i, "--pg"));
                case "-h", "--help" -> {
                    System.out.println("usage: scripts/quickstart [--duration SECONDS] [--pg 14|15|16|17|18]");
                    return;
                }
                default -> {
                    System.err.println("quickstart: unknown argument '" + args[i] + "' (try --help)");
                    System.exit(2);
                }
            }
        }
        new Quickstart().run(duration, major);
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            System.err.println("quickstart: " + option + " needs a value");
            System.exit(2);
        }
        return args[i];
    }

    private void run(Duration duration, int major) throws Exception {
        CountDownLatch stopped = new CountDownLatch(1);
        say("starting an embedded PostgreSQL " + major + " with wal_level=logical ...");
        EmbeddedPostgres postgres = EmbeddedPostgres.builder().major(major).start();
        WebhookReceiver sink = null;
        WalhookProcess walhook = null;
        Thread hook = null;
        try {
            String database = postgres.createDatabase("shop");
            try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE orders (id serial PRIMARY KEY, customer text NOT NULL, status text NOT NULL,"
                        + " amount numeric(10,2) NOT NULL, created_at timestamptz NOT NULL DEFAULT now())");
            }
            say("PostgreSQL: " + postgres.sourceUrl(database) + " (table public.orders)");

            sink = WebhookReceiver.start(request -> say("sink received " + request.method() + " " + request.path()
                    + " webhook-id=" + request.header("webhook-id") + "\n" + request.body()));
            say("local sink: " + sink.url("/events"));

            Map<String, String> env = Map.of(
                    "WALHOOK_SOURCE_URL", postgres.sourceUrl(database),
                    "WALHOOK_SUBSCRIPTIONS_DEMO_URL", sink.url("/events"),
                    "WALHOOK_SUBSCRIPTIONS_DEMO_TABLES", "public.orders",
                    "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true",
                    "WALHOOK_API_TOKEN", API_TOKEN);
            say("starting walhook (target/quarkus-app/quarkus-run.jar) with:");
            env.forEach((k, v) -> System.out.println("    " + k + "=" + v));
            walhook = WalhookProcess.start(env);
            walhook.awaitReady(Duration.ofSeconds(90));
            say("walhook is ready: http://127.0.0.1:" + walhook.httpPort() + "/q/health/ready, /q/openapi, and /status"
                    + " with 'Authorization: Bearer " + API_TOKEN + "' (the API needs WALHOOK_API_TOKEN, reads included)");
            status(walhook);

            final WalhookProcess running = walhook;
            final WebhookReceiver openSink = sink;
            hook = new Thread(() -> {
                say("stopping ...");
                stopAll(running, openSink, postgres);
                stopped.countDown();
            }, "quickstart-stop");
            Runtime.getRuntime().addShutdownHook(hook);

            Instant end = duration == null ? null : Instant.now().plus(duration);
            say(duration == null ? "making changes; Ctrl-C stops everything"
                    : "making changes for " + duration.toSeconds() + " s; Ctrl-C stops earlier");
            int next = 0;
            try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                while (end == null || Instant.now().isBefore(end)) {
                    if (next < CHANGES.size()) {
                        String sql = CHANGES.get(next++);
                        s.execute(sql);
                        say("SQL> " + sql);
                    } else if (next == CHANGES.size()) {
                        next++;
                        status(walhook);
                        say("all demo changes made. Keep changing public.orders with psql on the URL above, or wait.");
                    }
                    if (!walhook.isAlive()) {
                        throw new IllegalStateException("walhook exited; its output:\n" + walhook.output());
                    }
                    if (stopped.await(2, TimeUnit.SECONDS)) {
                        return;
                    }
                }
            } catch (SQLException e) {
                if (stopped.getCount() == 0) {
                    return; // Ctrl-C stopped the database under us
                }
                throw e;
            }
            status(walhook);
            int received = sink.requests().size();
            say("sink received " + received + " request(s) in all" + (received > 0 ? "" : ": none arrived; see"
                    + " replication and the subscription's last_error in /status above, and walhook's log"));
        } finally {
            if (hook != null) {
                try {
                    Runtime.getRuntime().removeShutdownHook(hook);
                } catch (IllegalStateException alreadyShuttingDown) {
                    stopped.await(60, TimeUnit.SECONDS);
                    return;
                }
            }
            say("stopping ...");
            stopAll(walhook, sink, postgres);
            say("stopped cleanly");
        }
    }

    private static void stopAll(WalhookProcess walhook, WebhookReceiver sink, EmbeddedPostgres postgres) {
        if (walhook != null) {
            walhook.terminate();
            try {
                walhook.awaitExit(Duration.ofSeconds(30));
            } catch (InterruptedException | AssertionError e) {
                // close() below kills it
            }
            walhook.close();
        }
        if (sink != null) {
            sink.close();
        }
        postgres.stop();
    }

    private static void status(WalhookProcess walhook) {
        try {
            HttpResponse<String> response = HttpClient.newHttpClient().send(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + walhook.httpPort() + "/status"))
                            .header("Authorization", "Bearer " + API_TOKEN).timeout(Duration.ofSeconds(5)).build(),
                    HttpResponse.BodyHandlers.ofString());
            say("GET /status -> " + response.statusCode() + " " + response.body());
        } catch (Exception e) {
            say("GET /status failed: " + e);
        }
    }

    private static void say(String line) {
        System.out.println("[quickstart] " + line);
    }
}
