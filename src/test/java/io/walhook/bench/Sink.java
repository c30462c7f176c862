package io.walhook.bench;

import java.util.Map;
import java.util.concurrent.TimeUnit;

/** Where the benchmark's walhook delivers: counts what arrives, keeps nothing. */
interface Sink extends AutoCloseable {

    /** The subscription's environment variables that point walhook here (destination, batching). */
    Map<String, String> subscription(String prefix, int batch);

    /** Waits up to {@code timeout} for all target events; true once they are in. */
    boolean await(long timeout, TimeUnit unit) throws InterruptedException;

    long events();

    /** Requests (webhooks) or messages (AMQP). */
    long requests();

    /** Requests that carried a batch (JSON array). */
    long batchRequests();

    long bytes();

    /** System.nanoTime() when the first event arrived; 0 before. */
    long firstEventNanos();

    /** System.nanoTime() when the target was reached; 0 before. */
    long completedNanos();

    @Override
    void close();
}
