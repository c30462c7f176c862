package io.walhook.delivery;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import com.sun.net.httpserver.HttpServer;

import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.walhook.routing.Destination;

/**
 * What one webhook request costs the sending side, cold and warm (a benchmark, not a test): four
 * threads, as four lanes, post bodies of one size to a local JDK HTTP server, in rounds of the same
 * number of requests; each round prints the event loops' CPU per request and the other threads'
 * (the lanes, the receiver and the JIT compilers).
 * {@code java -Xmx256m -XX:+UseSerialGC -cp target/test-classes:target/classes:$(cat target/quickstart.classpath)
 * io.walhook.delivery.WebhookClientBench [requests per thread per round (250)] [body bytes (163000)] [event loops (4)]}
 */
public final class WebhookClientBench {

    private WebhookClientBench() {
    }

    public static void main(String[] args) throws Exception {
        int perThread = args.length > 0 ? Integer.parseInt(args[0]) : 250;
        int size = args.length > 1 ? Integer.parseInt(args[1]) : 163_000;
        int eventLoops = args.length > 2 ? Integer.parseInt(args[2]) : 4;
        int threads = 4;
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 128);
        ExecutorService receiver = Executors.newFixedThreadPool(2);
        server.setExecutor(receiver);
        server.createContext("/", exchange -> {
            exchange.getRequestBody().readAllBytes();
            exchange.sendResponseHeaders(204, -1);
            exchange.close();
        });
        server.start();
        Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(eventLoops));
        Destination.Webhook destination = new Destination.Webhook(
                URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/bench"), List.of(), Map.of());
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) '7');
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        try (WebhookClient client = new WebhookClient(vertx)) {
            for (int round = 0; round < 4; round++) {
                Map<Long, Long> before = new HashMap<>();
                for (long id : mx.getAllThreadIds()) {
                    before.put(id, mx.getThreadCpuTime(id));
                }
                long start = System.nanoTime();
                List<Thread> lanes = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    Thread lane = new Thread(() -> {
                        try {
                            for (int i = 0; i < perThread; i++) {
                                client.post(destination, "evt", body, "application/json", Map.of(), 1, Duration.ofSeconds(10));
                            }
                        } catch (Exception e) {
                            throw new IllegalStateException(e);
                        }
                    }, "lane-" + t);
                    lanes.add(lane);
                    lane.start();
                }
                for (Thread lane : lanes) {
                    lane.join();
                }
                long eventLoop = 0;
                long other = 0;
                for (long id : mx.getAllThreadIds()) {
                    ThreadInfo info = mx.getThreadInfo(id);
                    if (info != null) {
                        long cpu = mx.getThreadCpuTime(id) - before.getOrDefault(id, 0L);
                        if (info.getThreadName().startsWith("vert.x-eventloop")) {
                            eventLoop += cpu;
                        } else {
                            other += cpu;
                        }
                    }
                }
                int requests = perThread * threads;
                System.out.printf("round %d: %,d requests of %,d bytes, event loops %.0f us per request, other threads %.0f us,"
                        + " %.0f ms%n", round, requests, size, eventLoop / 1e3 / requests, other / 1e3 / requests,
                        (System.nanoTime() - start) / 1e6);
            }
        } finally {
            vertx.close().toCompletionStage().toCompletableFuture().get();
            server.stop(0);
            receiver.shutdownNow();
        }
    }
}
