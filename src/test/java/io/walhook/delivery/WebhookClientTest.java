package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import io.vertx.core.Handler;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.PemTrustOptions;
import io.vertx.core.net.PfxOptions;
import io.walhook.routing.Destination;

/**
 * The webhook HTTP client against real HTTP servers (Vert.x servers in the test): headers and body
 * as sent, keep-alive, redirects not followed, a response that never comes, TLS verification, and
 * HTTP/2 where a TLS server offers it.
 */
class WebhookClientTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(5);
    private static Vertx vertx;
    private static WebhookClient client;

    @TempDir
    static Path certificates;

    /** What a test server saw of one request. */
    private record Seen(HttpVersion version, String path, Map<String, String> headers, String body) {
    }

    @BeforeAll
    static void start() {
        vertx = Vertx.vertx();
        client = new WebhookClient(vertx);
    }

    @AfterAll
    static void stop() {
        client.close();
        vertx.close().toCompletionStage().toCompletableFuture().join();
    }

    @Test
    void postsTheBodyWithTheStandardWebhooksHeadersOverOneKeptAliveConnection() throws Exception {
        Queue<Seen> seen = new ConcurrentLinkedQueue<>();
        AtomicInteger connections = new AtomicInteger();
        HttpServer server = listen(new HttpServerOptions(), recording(seen, request -> request.response().setStatusCode(204)
                .end()), connections);
        try {
            Destination.Webhook webhook = new Destination.Webhook(URI.create("http://127.0.0.1:" + server.actualPort() + "/hook"),
                    List.of("secret-key".getBytes(StandardCharsets.UTF_8)), Map.of("x-team", "payments"));
            for (int i = 0; i < 20; i++) {
                WebhookClient.Response response = client.post(webhook, "evt_" + i, ("{\"n\":" + i + "}").getBytes(StandardCharsets.UTF_8),
                        "application/json", Map.of("ce-type", "test"), 1_700_000_000L, TIMEOUT);
                assertThat(response.status()).isEqualTo(204);
            }
            assertThat(seen).hasSize(20);
            Seen first = seen.peek();
            assertThat(first.version()).isEqualTo(HttpVersion.HTTP_1_1);
            assertThat(first.path()).isEqualTo("/hook");
            assertThat(first.body()).isEqualTo("{\"n\":0}");
            assertThat(first.headers()).containsEntry("content-type", "application/json")
                    .containsEntry("webhook-id", "evt_0").containsEntry("webhook-timestamp", "1700000000")
                    .containsEntry("ce-type", "test").containsEntry("x-team", "payments").containsEntry("user-agent", "walhook");
            assertThat(first.headers().get("webhook-signature")).isEqualTo(WebhookSigner.sign(webhook.secrets(), "evt_0",
                    1_700_000_000L, "{\"n\":0}".getBytes(StandardCharsets.UTF_8)));
            // kept alive and reused: the pool may open a second while the first is being handed back
            assertThat(connections.get()).as("connections for 20 requests one after the other").isBetween(1, 2);
        } finally {
            close(server);
        }
    }

    /**
     * A destination no subscription posts to any more (its tenant deleted, or moved to another host)
     * does not keep its gate: thousands of tenants' hosts came and went, and every gate stayed for as
     * long as walhook ran. One a subscription still posts to stays the same gate.
     */
    @Test
    void aGateNoSubscriptionHoldsIsLetGo() {
        DestinationGate kept = client.gate(URI.create("https://kept.example.com/hook"));
        for (int i = 0; i < 1000; i++) {
            client.gate(URI.create("https://tenant-" + i + ".example.com/hook"));
        }
        assertThat(client.gates()).isGreaterThan(1);
        await().atMost(Duration.ofSeconds(30)).until(() -> {
            System.gc();
            client.gate(URI.create("https://other.example.com/hook")); // a look up lets go of what was collected
            return client.gates() <= 2;
        });
        assertThat(client.gate(URI.create("https://kept.example.com:443/other"))).isSameAs(kept);
    }

    /**
     * One receiver written with and without its scheme's port is one destination: its pools are
     * one, and so is its limit of requests under way (two gates let twice the pools' connections
     * queue, each with its timeout running).
     */
    @Test
    void aDestinationWrittenWithAndWithoutItsDefaultPortSharesOneLimit() {
        assertThat(client.gate(URI.create("https://Hooks.example.com/a")))
                .isSameAs(client.gate(URI.create("https://hooks.example.com:443/b")));
        assertThat(client.gate(URI.create("http://hooks.example.com/a")))
                .isSameAs(client.gate(URI.create("http://hooks.example.com:80/b")));
        assertThat(client.gate(URI.create("http://hooks.example.com/a")))
                .isNotSameAs(client.gate(URI.create("https://hooks.example.com/a")))
                .isNotSameAs(client.gate(URI.create("http://hooks.example.com:8080/a")));
    }

    @Test
    void aRedirectIsAnsweredNotFollowedAndRetryAfterIsPassedOn() throws Exception {
        Queue<Seen> seen = new ConcurrentLinkedQueue<>();
        HttpServer server = listen(new HttpServerOptions(), recording(seen, request -> {
            if (request.path().equals("/moved")) {
                request.response().setStatusCode(307).putHeader("location", "/elsewhere").end();
            } else {
                request.response().setStatusCode(503).putHeader("retry-after", "7").end("busy");
            }
        }), new AtomicInteger());
        try {
            assertThat(client.post(webhook(server, "http", "/moved"), "evt_1", new byte[0], "application/json", Map.of(), 1,
                    TIMEOUT).status()).isEqualTo(307);
            WebhookClient.Response busy = client.post(webhook(server, "http", "/busy"), "evt_2", new byte[0], "application/json",
                    Map.of(), 1, TIMEOUT);
            assertThat(busy.status()).isEqualTo(503);
            assertThat(busy.retryAfter()).isEqualTo("7");
            assertThat(seen).extracting(Seen::path).containsExactly("/moved", "/busy");
        } finally {
            close(server);
        }
    }

    @Test
    void aResponseThatNeverComesFailsAfterTheTimeoutAndTheNextRequestStillGoesThrough() throws Exception {
        HttpServer server = listen(new HttpServerOptions(), request -> {
            if (!request.path().equals("/silent")) {
                request.response().end();
            } // /silent: never answered
        }, new AtomicInteger());
        try {
            long start = System.nanoTime();
            assertThatThrownBy(() -> client.post(webhook(server, "http", "/silent"), "evt_1", new byte[0], "application/json",
                    Map.of(), 1, Duration.ofMillis(300)))
                    .isInstanceOf(IOException.class).hasMessageContaining("no response within 300 ms");
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).isLessThan(TIMEOUT.toMillis());
            assertThat(client.post(webhook(server, "http", "/ok"), "evt_2", new byte[0], "application/json", Map.of(), 1,
                    TIMEOUT).status()).isEqualTo(200);
        } finally {
            close(server);
        }
    }

    /** A test server (not listening yet) counting the connections opened to it and those closed. */
    private static HttpServer counting(AtomicInteger connections, AtomicInteger closed) {
        return vertx.createHttpServer(new HttpServerOptions().setHost("127.0.0.1").setPort(0))
                .connectionHandler(connection -> {
                    connections.incrementAndGet();
                    connection.closeHandler(gone -> closed.incrementAndGet());
                    connection.exceptionHandler(cutShort -> { }); // the test server's side of a reset: not the client's
                });
    }

    /**
     * The status line is the outcome: a 2xx whose body never ends (a Content-Length larger than what
     * is sent, an endless stream) was taken by the receiver. Before, walhook waited for the body's
     * end, timed out, and sent the same event again and again, each time taken. The body is read
     * and dropped, for the request's timeout and 1 MiB at most, then its connection is closed; a body
     * that ends leaves its connection to be used again.
     */
    @Test
    void aSuccessWhoseBodyNeverEndsIsASuccessAndItsConnectionIsClosed() throws Exception {
        AtomicInteger connections = new AtomicInteger();
        AtomicInteger closed = new AtomicInteger();
        HttpServer server = counting(connections, closed).requestHandler(request -> {
            io.vertx.core.http.HttpServerResponse response = request.response();
            switch (request.path()) {
                case "/short" -> response.setStatusCode(200).putHeader("content-length", "100").write("ab");
                case "/endless" -> {
                    response.setStatusCode(202).setChunked(true);
                    long timer = vertx.setPeriodic(5, tick -> response.write(io.vertx.core.buffer.Buffer.buffer(new byte[64 << 10])));
                    response.closeHandler(gone -> vertx.cancelTimer(timer));
                }
                default -> response.setStatusCode(200).end("x".repeat(10_000));
            }
        }).listen().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
        VertxLogLines logged = new VertxLogLines();
        try {
            Duration timeout = Duration.ofSeconds(2);
            // bodies that end: one connection, used again
            for (int i = 0; i < 3; i++) {
                assertThat(client.post(webhook(server, "http", "/ok"), "evt_" + i, new byte[0], "application/json", Map.of(), 1,
                        timeout).status()).isEqualTo(200);
            }
            assertThat(connections.get()).as("connections for 3 requests one after the other").isBetween(1, 2);
            int before = connections.get();
            assertThat(client.post(webhook(server, "http", "/short"), "evt_4", new byte[0], "application/json", Map.of(), 1,
                    timeout).status()).isEqualTo(200);
            assertThat(client.post(webhook(server, "http", "/endless"), "evt_5", new byte[0], "application/json", Map.of(), 1,
                    timeout).status()).isEqualTo(202);
            // neither connection is used again: each closed once its body's time or size ran out
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> closed.get() >= 2);
            assertThat(client.post(webhook(server, "http", "/ok"), "evt_6", new byte[0], "application/json", Map.of(), 1,
                    timeout).status()).isEqualTo(200);
            assertThat(connections.get()).as("a new connection after the two cut short").isGreaterThan(before);
        } finally {
            logged.close();
            close(server);
        }
        // a body cut short is the attempt's business: Vert.x logged its reset as an error of its own
        assertThat(logged.lines).as("Vert.x's own warnings and errors").isEmpty();
    }

    /**
     * A receiver that answers at once and trickles its body, a few bytes at a time, for longer than
     * the request's timeout: the attempt is a success as soon as the body has had a second to end,
     * not at the timeout. Before, each such request took the whole timeout (30 s by default), and a
     * subscription's events waited behind four of them at a time, holding the slot's position.
     */
    @Test
    void aSuccessWhoseBodyTricklesIsASuccessWithoutWaitingForItsTimeout() throws Exception {
        HttpServer server = listen(new HttpServerOptions(), request -> {
            io.vertx.core.http.HttpServerResponse response = request.response();
            response.setStatusCode(200).putHeader("content-length", "100000").write("a");
            long timer = vertx.setPeriodic(200, tick -> response.write("b"));
            response.closeHandler(gone -> vertx.cancelTimer(timer));
        }, new AtomicInteger());
        try {
            java.util.concurrent.CompletableFuture<WebhookClient.Response> answer = client.postAsync(webhook(server, "http", "/slow"), "evt_1",
                    new byte[0], "application/json", Map.of(), 1, Duration.ofMinutes(2), false);
            await().atMost(Duration.ofSeconds(30)).until(answer::isDone);
            assertThat(answer.get().status()).isEqualTo(200);
        } finally {
            close(server);
        }
    }

    /**
     * A receiver answering {@code Keep-Alive: timeout=0}: Vert.x keeps such a connection in its pool
     * for good (it reads 0 as "never expires"), so each address a rotating host name gave left one
     * more open for as long as walhook ran. It is closed once its response ends; the next request
     * opens another. A receiver giving a time keeps its connection for the next request.
     */
    @Test
    void aConnectionItsReceiverKeepsNoTimeIsClosedOnceItsResponseEnds() throws Exception {
        AtomicInteger connections = new AtomicInteger();
        AtomicInteger closed = new AtomicInteger();
        HttpServer server = counting(connections, closed).requestHandler(request -> request.response().setStatusCode(204)
                        .putHeader("keep-alive", request.path().equals("/none") ? "timeout=0, max=100" : "timeout=5").end())
                .listen().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
        try {
            for (int i = 0; i < 2; i++) {
                assertThat(client.post(webhook(server, "http", "/none"), "evt_" + i, new byte[0], "application/json",
                        Map.of(), 1, TIMEOUT).status()).isEqualTo(204);
                int after = i + 1;
                org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> closed.get() == after);
            }
            assertThat(connections.get()).as("a connection per request").isEqualTo(2);
            for (int i = 0; i < 3; i++) {
                assertThat(client.post(webhook(server, "http", "/five"), "evt_" + i, new byte[0], "application/json",
                        Map.of(), 1, TIMEOUT).status()).isEqualTo(204);
            }
            assertThat(connections.get()).as("kept alive for 5 s: used again").isBetween(3, 4);
            assertThat(closed.get()).isEqualTo(2);
        } finally {
            close(server);
        }
        assertThat(WebhookClient.keptForGood("timeout=0")).isTrue();
        assertThat(WebhookClient.keptForGood("max=5,  Timeout=00")).isTrue();
        assertThat(WebhookClient.keptForGood("timeout=9, timeout=0")).as("Vert.x reads no 9, and takes the next").isTrue();
        assertThat(WebhookClient.keptForGood("timeout = 0")).as("not a timeout Vert.x reads").isFalse();
        assertThat(WebhookClient.keptForGood("timeout=5, max=100")).isFalse();
        assertThat(WebhookClient.keptForGood("max=0")).isFalse();
        assertThat(WebhookClient.keptForGood("timeout=")).isFalse();
        assertThat(WebhookClient.keptForGood(null)).isFalse();
    }

    /**
     * A receiver that sends an interim answer other than 100 and 103 (an HTTP/1.1 {@code 102
     * Processing}) before its final one. The Vert.x client takes any other 1xx as the final answer
     * and gives the connection to the next request, which then read the late final answer meant for
     * the first: the second request here was taken as a 200 that the receiver gave the first, and
     * its own 500 went to the request after it (a failed event counted delivered, and lost). An
     * interim answer now fails its attempt (to be retried) and closes its connection.
     */
    @Test
    void anInterimAnswerFailsTheAttemptAndItsConnectionIsNotUsedAgain() throws Exception {
        AtomicInteger connections = new AtomicInteger();
        Queue<String> answered = new ConcurrentLinkedQueue<>();
        try (VertxLogLines logged = new VertxLogLines();
                java.net.ServerSocket listening = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            Thread acceptor = new Thread(() -> {
                while (!listening.isClosed()) {
                    try {
                        java.net.Socket socket = listening.accept();
                        connections.incrementAndGet();
                        Thread handler = new Thread(() -> processingFirst(socket, answered));
                        handler.setDaemon(true);
                        handler.start();
                    } catch (IOException closed) {
                        return;
                    }
                }
            });
            acceptor.setDaemon(true);
            acceptor.start();
            Destination.Webhook slow = new Destination.Webhook(URI.create("http://127.0.0.1:" + listening.getLocalPort() + "/"),
                    List.of(), Map.of());
            for (int i = 1; i <= 2; i++) {
                WebhookClient.Response response;
                try {
                    response = client.post(slow, "evt_" + i, new byte[] {'{', '}'}, "application/json", Map.of(), 1, TIMEOUT);
                } catch (IOException failed) {
                    assertThat(failed).hasMessageContaining("102");
                    continue;
                }
                assertThat(response.status()).as("request %d, the receiver's answers in order: %s", i, answered)
                        .isNotEqualTo(200).isGreaterThanOrEqualTo(200);
            }
            assertThat(connections.get()).as("connections for two requests").isEqualTo(2);
            assertThat(logged.lines).as("Vert.x's own warnings and errors of the connection closed").isEmpty();
        }
    }

    /**
     * A receiver's own text (a status line walhook cannot read) reaches the log, {@code /status}
     * and the dead letters through the attempt's problem: control characters (a terminal's escape
     * sequences) are shown escaped, and the text is cut to a line's length.
     */
    @Test
    void aReceiversTextInAProblemHasNoControlCharactersAndIsShort() throws Exception {
        try (java.net.ServerSocket listening = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            Thread server = new Thread(() -> {
                while (!listening.isClosed()) {
                    try (java.net.Socket socket = listening.accept()) {
                        readRequest(new java.io.BufferedInputStream(socket.getInputStream()));
                        socket.getOutputStream().write(("HTTP/1.1 2\u001b]0;owned\u0007\u009b31m" + "X".repeat(3_000)
                                + " OK\r\ncontent-length: 0\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
                        socket.getOutputStream().flush();
                        socket.getInputStream().read();
                    } catch (IOException closed) {
                        // next
                    }
                }
            });
            server.setDaemon(true);
            server.start();
            Destination.Webhook odd = new Destination.Webhook(URI.create("http://127.0.0.1:" + listening.getLocalPort() + "/"),
                    List.of(), Map.of());
            Transport.Attempt attempt = new WebhookTransport(client, odd, java.time.Clock.systemUTC(), TIMEOUT, false)
                    .send(new Transport.Request("evt_1", new byte[] {'{', '}'}, "application/json", Map.of(), null))
                    .get(30, TimeUnit.SECONDS);
            assertThat(attempt.outcome()).isEqualTo(Transport.Outcome.RETRY);
            assertThat(attempt.problem()).as(attempt.problem()).doesNotContainPattern("[\\p{Cntrl}\u0080-\u009f]")
                    .hasSizeLessThanOrEqualTo(Transport.Attempt.PROBLEM_LENGTH);
        }
    }

    /**
     * Answers a connection's first request {@code 102} at once and {@code 200} a moment later, or as
     * soon as a second request comes on the connection, and that second one 500.
     */
    private static void processingFirst(java.net.Socket socket, Queue<String> answered) {
        try (socket) {
            var in = new java.io.BufferedInputStream(socket.getInputStream());
            var out = socket.getOutputStream();
            readRequest(in);
            out.write("HTTP/1.1 102 Processing\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            socket.setSoTimeout(500);
            boolean second;
            try {
                second = readRequest(in);
            } catch (java.net.SocketTimeoutException nothingMore) {
                second = false;
            }
            out.write("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            answered.add("200 for the first");
            if (second) {
                out.write("HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                answered.add("500 for the second");
            }
            out.flush();
            socket.setSoTimeout(2_000);
            while (in.read() >= 0) {
                // until the client closes
            }
        } catch (IOException gone) {
            // the client closed the connection
        }
    }

    /** Reads one request's head and body; false at the end of the connection. */
    private static boolean readRequest(java.io.InputStream in) throws IOException {
        StringBuilder head = new StringBuilder();
        int c;
        while (!head.toString().endsWith("\r\n\r\n")) {
            if ((c = in.read()) < 0) {
                return false;
            }
            head.append((char) c);
        }
        java.util.regex.Matcher length = java.util.regex.Pattern.compile("(?i)content-length: *(\\d+)").matcher(head);
        in.readNBytes(length.find() ? Integer.parseInt(length.group(1)) : 0);
        return true;
    }

    @Test
    void aClosedClientFailsTheAttemptAtOnceRatherThanAsATimeout() throws Exception {
        HttpServer server = listen(new HttpServerOptions(), request -> request.response().end(), new AtomicInteger());
        try {
            WebhookClient closed = new WebhookClient(vertx);
            closed.close(); // as at shutdown, with a lane still posting
            assertThatThrownBy(() -> closed.post(webhook(server, "http", "/ok"), "evt_1", new byte[0], "application/json",
                    Map.of(), 1, Duration.ofSeconds(30)))
                    .isInstanceOf(IOException.class).hasMessageNotContaining("no response within");
        } finally {
            close(server);
        }
    }

    /**
     * A receiver that resets its connections: each reset is the attempt's failure, which the lane
     * logs under its subscription. Vert.x logged it once more as an ERROR of its own, naming
     * neither subscription nor destination (33 such lines in a second from one failing tenant).
     */
    @Test
    void aConnectionResetIsTheAttemptsFailureAndNotAnErrorLineOfItsOwn() throws Exception {
        VertxLogLines logged = new VertxLogLines();
        try (java.net.ServerSocket listening = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            Thread acceptor = new Thread(() -> {
                while (!listening.isClosed()) {
                    try (java.net.Socket socket = listening.accept()) {
                        socket.getInputStream().read(new byte[4096]); // the request's start, then a reset
                        socket.setSoLinger(true, 0);
                    } catch (IOException closed) {
                        if (listening.isClosed()) {
                            return;
                        }
                    }
                }
            });
            acceptor.setDaemon(true);
            acceptor.start();
            Destination.Webhook resetting = new Destination.Webhook(
                    URI.create("http://127.0.0.1:" + listening.getLocalPort() + "/"), List.of(), Map.of());
            for (int i = 1; i <= 3; i++) {
                String id = "evt_" + i;
                assertThatThrownBy(() -> client.post(resetting, id, new byte[] {'{', '}'}, "application/json", Map.of(), 1,
                        TIMEOUT)).isInstanceOf(IOException.class).hasMessageContainingAll("reset");
            }
        } finally {
            logged.close();
        }
        assertThat(logged.lines).as("Vert.x's own warnings and errors").isEmpty();
    }

    /** The warnings and errors Vert.x logs itself, from its making to its closing. */
    private static final class VertxLogLines extends java.util.logging.Handler implements AutoCloseable {
        final Queue<String> lines = new ConcurrentLinkedQueue<>();
        private final java.util.logging.Logger vertxLog = java.util.logging.Logger.getLogger("io.vertx");

        VertxLogLines() {
            vertxLog.addHandler(this);
        }

        @Override
        public void publish(java.util.logging.LogRecord record) {
            if (record.getLevel().intValue() >= java.util.logging.Level.WARNING.intValue()) {
                lines.add(record.getLoggerName() + ": " + record.getMessage());
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
            vertxLog.removeHandler(this);
        }
    }

    @Test
    void nobodyListeningIsAConnectionErrorNamed() throws Exception {
        // a port that was just free and is closed again at once (a closed Vert.x server could still
        // accept a connection for a moment and reset it)
        int port;
        try (java.net.ServerSocket socket = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = socket.getLocalPort();
        }
        Destination.Webhook gone = new Destination.Webhook(URI.create("http://127.0.0.1:" + port + "/"), List.of(), Map.of());
        assertThatThrownBy(() -> client.post(gone, "evt_1", new byte[0], "application/json", Map.of(), 1, TIMEOUT))
                .isInstanceOf(IOException.class).hasMessageContaining("Connection refused");
    }

    /**
     * A host name whose first label is the endpoint's secret (Pipedream's): the error of a name
     * that does not resolve began with the host as written, before the redacted cause.
     */
    @Test
    void aHostThatDoesNotResolveIsNamedWithoutTheLabelThatMayBeACredential() {
        Destination.Webhook secretHost = new Destination.Webhook(URI.create("https://eo3kz7m2x9q1ab8.m.pipedream.invalid/"),
                List.of(), Map.of());
        assertThatThrownBy(() -> client.postAsync(secretHost, "evt_1", new byte[0], "application/json", Map.of(), 1,
                TIMEOUT, true).get(30, java.util.concurrent.TimeUnit.SECONDS))
                .hasRootCauseInstanceOf(IOException.class).rootCause().hasMessageContaining("does not resolve")
                .hasMessageContaining("[redacted].m.pipedream.invalid").hasMessageNotContaining("eo3kz7m2x9q1ab8");
    }

    @Test
    void aTlsServerWhoseCertificateIsNotTrustedIsRefusedAndATrustedOneIsSpokenToOverHttp2() throws Exception {
        Path keyStore = selfSigned();
        Queue<Seen> seen = new ConcurrentLinkedQueue<>();
        HttpServer server = listen(new HttpServerOptions().setSsl(true).setUseAlpn(true)
                .setKeyCertOptions(new PfxOptions().setPath(keyStore.toString()).setPassword("changeit")),
                recording(seen, request -> request.response().end()), new AtomicInteger());
        try {
            Destination.Webhook webhook = webhook(server, "https", "/tls");
            // the JVM's trust store does not know the test's self-signed certificate
            assertThatThrownBy(() -> client.post(webhook, "evt_1", "{}".getBytes(StandardCharsets.UTF_8), "application/json",
                    Map.of(), 1, TIMEOUT)).isInstanceOf(IOException.class).hasMessageContaining("SSL");
            assertThat(seen).isEmpty();

            try (WebhookClient trusting = new WebhookClient(vertx, new PemTrustOptions().addCertValue(
                    io.vertx.core.buffer.Buffer.buffer(Files.readString(keyStore.resolveSibling("walhook-test.pem")))))) {
                assertThat(trusting.post(webhook, "evt_2", "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), 1,
                        TIMEOUT).status()).isEqualTo(200);
            }
            assertThat(seen).singleElement().satisfies(request -> {
                assertThat(request.version()).as("ALPN chose HTTP/2").isEqualTo(HttpVersion.HTTP_2);
                assertThat(request.headers()).containsEntry("webhook-id", "evt_2");
                assertThat(request.body()).isEqualTo("{}");
            });
        } finally {
            close(server);
        }
    }

    /**
     * An HTTP/2 connection that goes silent (a NAT entry lost, a front end frozen while its kernel
     * still acknowledges) is dropped once a request on it times out and it does not answer a ping:
     * a reset only ended the request's stream, and the pool went on putting every request to the
     * host on the dead connection, each timing out, until TCP gave up (if it ever did). Over
     * HTTP/1.1 the reset closes the connection.
     */
    @Test
    void aSilentHttp2ConnectionIsDroppedOnceARequestOnItTimesOutAndTheNextRequestsGoOnANewOne() throws Exception {
        Path keyStore = selfSigned();
        Queue<Seen> seen = new ConcurrentLinkedQueue<>();
        AtomicInteger connections = new AtomicInteger();
        HttpServer server = listen(new HttpServerOptions().setSsl(true).setUseAlpn(true)
                .setKeyCertOptions(new PfxOptions().setPath(keyStore.toString()).setPassword("changeit")),
                recording(seen, request -> request.response().end()), connections);
        try (io.walhook.testing.TcpProxy proxy = io.walhook.testing.TcpProxy.to("127.0.0.1", server.actualPort());
                WebhookClient trusting = new WebhookClient(vertx, new PemTrustOptions().addCertValue(
                        io.vertx.core.buffer.Buffer.buffer(Files.readString(keyStore.resolveSibling("walhook-test.pem")))))) {
            Destination.Webhook webhook = new Destination.Webhook(URI.create("https://127.0.0.1:" + proxy.port() + "/h2"),
                    List.of(), Map.of());
            assertThat(trusting.post(webhook, "evt_1", "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), 1,
                    TIMEOUT).status()).isEqualTo(200);
            assertThat(seen).singleElement().extracting(Seen::version).isEqualTo(HttpVersion.HTTP_2);
            assertThat(proxy.connections()).isEqualTo(1);

            proxy.silenceAll(); // that connection passes nothing on from now on; new ones work
            assertThatThrownBy(() -> trusting.post(webhook, "evt_2", "{}".getBytes(StandardCharsets.UTF_8),
                    "application/json", Map.of(), 1, Duration.ofMillis(500)))
                    .isInstanceOf(IOException.class).hasMessageContaining("no response within 500 ms");

            // as a lane retries: each attempt after the first failure goes on a connection that answers
            AtomicInteger attempt = new AtomicInteger(2);
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(200))
                    .ignoreExceptions().until(() -> trusting.post(webhook, "evt_" + attempt.incrementAndGet(),
                            "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), 1,
                            Duration.ofSeconds(1)).status() == 200);
            assertThat(proxy.connections()).as("a new connection").isEqualTo(2);
            assertThat(seen).extracting(Seen::version).containsOnly(HttpVersion.HTTP_2);
        } finally {
            close(server);
        }
    }

    /**
     * An HTTP/2 receiver that allows few streams on each connection takes as many requests at once
     * as the pools' connections to it carry, and its gate lets no more through: the rest waited in
     * the pool's queue with their timeouts running, and failed unsent while it answered all it got.
     */
    @Test
    void anHttp2ReceiverAllowingFewStreamsLimitsTheRequestsLetThroughToWhatItsConnectionsCarry() throws Exception {
        Path keyStore = selfSigned();
        HttpServer few = listen(new HttpServerOptions().setSsl(true).setUseAlpn(true)
                .setInitialSettings(new io.vertx.core.http.Http2Settings().setMaxConcurrentStreams(1))
                .setKeyCertOptions(new PfxOptions().setPath(keyStore.toString()).setPassword("changeit")),
                request -> request.response().end(), new AtomicInteger());
        HttpServer many = listen(new HttpServerOptions().setSsl(true).setUseAlpn(true)
                .setKeyCertOptions(new PfxOptions().setPath(keyStore.toString()).setPassword("changeit")),
                request -> request.response().end(), new AtomicInteger());
        try (WebhookClient trusting = new WebhookClient(vertx, new PemTrustOptions().addCertValue(
                io.vertx.core.buffer.Buffer.buffer(Files.readString(keyStore.resolveSibling("walhook-test.pem")))))) {
            int channels = Math.max(1, Runtime.getRuntime().availableProcessors());
            int pools = WebhookClient.POOL_SIZE * channels;
            Destination.Webhook toFew = webhook(few, "https", "/few");
            Destination.Webhook toMany = webhook(many, "https", "/many");
            assertThat(trusting.gate(toFew.url()).limit()).isEqualTo(pools);
            assertThat(trusting.post(toFew, "evt_1", new byte[0], "application/json", Map.of(), 1, TIMEOUT).status())
                    .isEqualTo(200);
            assertThat(trusting.post(toMany, "evt_2", new byte[0], "application/json", Map.of(), 1, TIMEOUT).status())
                    .isEqualTo(200);
            assertThat(trusting.gate(toFew.url()).limit()).as("8 connections per pool, 1 stream each")
                    .isEqualTo(WebhookClient.POOL_SIZE / 8 * channels);
            assertThat(trusting.gate(toMany.url()).limit()).as("streams enough").isEqualTo(pools);
        } finally {
            close(few);
            close(many);
        }
    }

    @Test
    void largeBodiesArriveWholeOverHttp1AndHttp2() throws Exception {
        Path keyStore = selfSigned();
        Queue<Seen> seen = new ConcurrentLinkedQueue<>();
        HttpServer plain = listen(new HttpServerOptions(), recording(seen, request -> request.response().end()),
                new AtomicInteger());
        HttpServer tls = listen(new HttpServerOptions().setSsl(true).setUseAlpn(true)
                .setKeyCertOptions(new PfxOptions().setPath(keyStore.toString()).setPassword("changeit")),
                recording(seen, request -> request.response().end()), new AtomicInteger());
        try (WebhookClient trusting = new WebhookClient(vertx, new PemTrustOptions().addCertValue(
                io.vertx.core.buffer.Buffer.buffer(Files.readString(keyStore.resolveSibling("walhook-test.pem")))))) {
            // around Netty's pooled chunk (64 KiB under Quarkus) and well past it, as batches are
            for (int length : new int[] {65_536, 65_537, 300_077}) {
                StringBuilder text = new StringBuilder(length);
                for (int i = 0; text.length() < length; i++) {
                    text.append(i % 10);
                }
                byte[] body = text.toString().getBytes(StandardCharsets.UTF_8);
                for (HttpServer server : List.of(plain, tls)) {
                    String scheme = server == tls ? "https" : "http";
                    assertThat(trusting.post(webhook(server, scheme, "/" + length), "evt_" + length, body,
                            "application/json", Map.of(), 1, TIMEOUT).status()).isEqualTo(200);
                }
            }
            assertThat(seen).hasSize(6).allSatisfy(request -> {
                int length = Integer.parseInt(request.path().substring(1));
                assertThat(request.body()).hasSize(length).startsWith("0123456789");
                assertThat(request.headers()).containsEntry("content-length", Integer.toString(length));
                assertThat(request.body().charAt(length - 1)).isEqualTo((char) ('0' + (length - 1) % 10));
            });
            assertThat(seen).extracting(Seen::version).containsOnly(HttpVersion.HTTP_1_1, HttpVersion.HTTP_2)
                    .contains(HttpVersion.HTTP_1_1, HttpVersion.HTTP_2);
        } finally {
            close(plain);
            close(tls);
        }
    }

    private static Handler<HttpServerRequest> recording(Queue<Seen> seen, Handler<HttpServerRequest> answer) {
        return request -> request.body().onSuccess(body -> {
            Map<String, String> headers = new java.util.TreeMap<>();
            request.headers().forEach(h -> headers.put(h.getKey().toLowerCase(java.util.Locale.ROOT), h.getValue()));
            seen.add(new Seen(request.version(), request.path(), headers, body.toString(StandardCharsets.UTF_8)));
            answer.handle(request);
        });
    }

    private static HttpServer listen(HttpServerOptions options, Handler<HttpServerRequest> handler, AtomicInteger connections)
            throws Exception {
        return vertx.createHttpServer(options.setHost("127.0.0.1").setPort(0))
                .connectionHandler(connection -> connections.incrementAndGet())
                .requestHandler(handler).listen().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }

    private static void close(HttpServer server) throws Exception {
        server.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }

    private static Destination.Webhook webhook(HttpServer server, String scheme, String path) {
        return new Destination.Webhook(URI.create(scheme + "://127.0.0.1:" + server.actualPort() + path), List.of(), Map.of());
    }

    /** A PKCS12 key store with a self-signed certificate for 127.0.0.1 (keytool), and the certificate as PEM beside it. */
    private static Path selfSigned() throws Exception {
        Path store = certificates.resolve("walhook-test.p12");
        if (!Files.exists(store)) {
            String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
            run(keytool, "-genkeypair", "-alias", "receiver", "-keyalg", "EC", "-groupname", "secp256r1",
                    "-dname", "CN=127.0.0.1", "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "2",
                    "-storetype", "PKCS12", "-keystore", store.toString(), "-storepass", "changeit");
            run(keytool, "-exportcert", "-rfc", "-alias", "receiver", "-keystore", store.toString(), "-storepass", "changeit",
                    "-file", certificates.resolve("walhook-test.pem").toString());
        }
        return store;
    }

    private static void run(String... command) throws Exception {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!process.waitFor(60, TimeUnit.SECONDS) || process.exitValue() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " failed: " + output);
        }
    }
}
