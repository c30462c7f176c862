package io.walhook.bench;

import java.util.Map;
import java.util.concurrent.TimeUnit;

/** Where the benchmark's walhook delivers: counts what arrives, keeps nothing. */
interface Sink extends AutoCloseable {

    /** The subscription's environment variables that point walhook here (destination, batching). */
    Map<String, String> subscription(String prefix, int batch);

    /** What arrived so far. */
    Tally tally();

    /** Requests (webhooks) or messages (AMQP). */
    long requests();

    /** Requests that carried a batch (JSON array). */
    long batchRequests();

    @Override
    void close();
}
