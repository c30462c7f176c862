package io.walhook.delivery;

import java.io.IOException;
import java.net.URI;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import io.netty.buffer.Unpooled;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.impl.VertxInternal;
import io.vertx.core.net.SocketAddress;
import io.vertx.core.net.TrustOptions;
import io.walhook.config.UrlAuthority;
import io.walhook.routing.Destination;

/**
 * The HTTP client every webhook shares, on Quarkus's Vert.x: pooled keep-alive connections per
 * host, HTTP/2 where a TLS server offers it (ALPN), plain HTTP/1.1 otherwise (no h2c upgrade
 * dance with plain-HTTP receivers). Redirects are not followed: a 3xx is a failure.
 *
 * <p>A lane's thread calls {@link #post} and waits; its channel's event loop does the I/O. The body is
 * handed to Netty without a copy; the response body is read and dropped, so the connection can be
 * reused.
 */
public final class WebhookClient implements AutoCloseable {

    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger(WebhookClient.class);

    /** Connections kept per destination host: enough for every lane of several subscriptions. */
    static final int POOL_SIZE = 64;
    private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);
    /**
     * How long a response's body may take to end once its status line came (it is read and dropped):
     * longer, its connection is closed and the status stands.
     */
    static final Duration BODY_WAIT = Duration.ofSeconds(1);
    /** A response body longer than this (read and dropped) closes its connection rather than be read to its end. */
    static final long DRAINED_BYTES = 1 << 20;

    /**
     * An event loop's context and the clients whose connections live on it: a request runs on its
     * channel's context from start to end, so the connection's I/O and the request's callbacks are
     * on one thread, with no hand-over between event loops. One channel per core: on two
     * cores two event loops halved the p99 latency of the first five seconds after readiness at
     * 1,000 single events a second (345 and 318 ms against 640 and 805) with the drain's CPU per
     * event no higher (docs/benchmarks.md); four loops on one or two cores (1,000 requests of 163 KB
     * from four threads) had taken a third more CPU than one.
     */
    private record Channel(Context context, HttpClient plain, HttpClient tls) {
    }

    private final Vertx vertx;
    private final Channel[] channels;
    /** Each destination's URL parsed once (Vert.x would parse the text on every request); a few hundred at most. */
    /** How often each client's pool looks for connections idle past their keep-alive. */
    static final int POOL_CLEANER_MILLIS = 10_000;
    private final Map<URI, java.net.URL> urls = new java.util.concurrent.ConcurrentHashMap<>();
    /**
     * Per scheme, host and port: requests under way to it, at most the connections the pools keep to
     * it. Held weakly: a gate lives as long as a subscription's transport, or a request under way,
     * holds it, and a host no subscription posts to any more (a tenant deleted, or moved) does not
     * keep one for as long as walhook runs.
     */
    private final Map<String, GateReference> gates = new java.util.concurrent.ConcurrentHashMap<>();
    /** Gates collected: their entries go at the next {@link #gate}. */
    private final java.lang.ref.ReferenceQueue<DestinationGate> collected = new java.lang.ref.ReferenceQueue<>();
    private final int perDestination;
    /**
     * Where Vert.x looks names up with the system's resolver, on the event loop connecting (the
     * native executable; {@code QUARKUS_VERTX_USE_ASYNC_DNS=false}): looked up on threads of
     * their own instead. Null where Vert.x's own resolver does not block.
     */
    private final HostLookups lookups;

    /** Trusts what the JVM trusts (its cacerts, or {@code -Djavax.net.ssl.trustStore}). */
    public WebhookClient(Vertx vertx) {
        this(vertx, null);
    }

    /** Trusts {@code trust} instead of the JVM's certificates (tests: a self-signed receiver); null: the JVM's. */
    WebhookClient(Vertx vertx, TrustOptions trust) {
        this(vertx, trust, 0);
    }

    /** {@code perDestination}: requests under way to one destination at once; 0 for the connections the pools keep. */
    WebhookClient(Vertx vertx, TrustOptions trust, int perDestination) {
        this.vertx = vertx;
        this.lookups = io.quarkus.runtime.ImageMode.current().isNativeImage() || Boolean.getBoolean("vertx.disableDnsResolver")
                ? new HostLookups() : null;
        // the pool closes connections idle past their keep-alive (60 s) at its next look: every 10 s, not
        // every second (Vert.x's default), so that an idle walhook's event loop is not woken for it
        PoolOptions pool = new PoolOptions().setHttp1MaxSize(POOL_SIZE).setHttp2MaxSize(POOL_SIZE / 8)
                .setCleanerPeriod(POOL_CLEANER_MILLIS);
        HttpClientOptions tlsOptions = options().setSsl(true).setUseAlpn(true).setVerifyHost(true)
                .setProtocolVersion(HttpVersion.HTTP_2);
        if (trust != null) {
            tlsOptions.setTrustOptions(trust);
        }
        this.channels = new Channel[Math.max(1, Runtime.getRuntime().availableProcessors())];
        this.perDestination = perDestination > 0 ? perDestination : POOL_SIZE * channels.length;
        for (int i = 0; i < channels.length; i++) {
            channels[i] = new Channel(((VertxInternal) vertx).createEventLoopContext(),
                    client(options().setProtocolVersion(HttpVersion.HTTP_1_1), pool), client(tlsOptions, pool));
        }
    }

    /**
     * A client whose connections' errors (a reset, a broken pipe) are the failure of the request
     * on them, which its lane logs under its subscription. Without a handler of its own, Vert.x
     * logged each once more as an ERROR naming neither (33 lines in a second from one failing
     * tenant); an idle kept-alive connection broken off by its receiver loses nothing.
     */
    private HttpClient client(HttpClientOptions options, PoolOptions pool) {
        return vertx.httpClientBuilder().with(options).with(pool)
                .withConnectHandler(connection -> connection.exceptionHandler(
                        // its kind only: its words can name the host (a TLS name mismatch), which no line shows whole
                        e -> LOG.debugf("a webhook connection failed: %s", e.getClass().getSimpleName())))
                .build();
    }

    private static HttpClientOptions options() {
        return new HttpClientOptions().setConnectTimeout((int) CONNECT_TIMEOUT.toMillis()).setKeepAlive(true)
                .setDecompressionSupported(false).setName("walhook-webhooks");
    }

    /**
     * The gate of {@code url}'s scheme, host and port, shared by every subscription posting there:
     * as many requests under way as the pools of all channels keep connections to it.
     */
    DestinationGate gate(URI url) {
        String scheme = url.getScheme() == null ? "" : url.getScheme().toLowerCase(java.util.Locale.ROOT);
        String named = UrlAuthority.host(url);
        String host = named == null ? "" : named.toLowerCase(java.util.Locale.ROOT);
        // the port the pools connect to: https://h/ and https://h:443/ are one destination with one limit
        int given = UrlAuthority.port(url);
        int port = given > 0 ? given : "https".equals(scheme) ? 443 : 80;
        String origin = scheme + "://" + host + ":" + port;
        for (java.lang.ref.Reference<?> gone; (gone = collected.poll()) != null;) {
            gates.remove(((GateReference) gone).origin, gone);
        }
        DestinationGate made = null;
        while (true) {
            GateReference known = gates.get(origin);
            DestinationGate gate = known == null ? null : known.get();
            if (gate != null) {
                return gate;
            }
            if (made == null) {
                made = new DestinationGate(perDestination, channels.length);
            }
            GateReference mine = new GateReference(origin, made, collected);
            if (known == null ? gates.putIfAbsent(origin, mine) == null : gates.replace(origin, known, mine)) {
                return made;
            }
        }
    }

    /** Gates known, collected ones included until the next {@link #gate}. */
    int gates() {
        return gates.size();
    }

    private static final class GateReference extends java.lang.ref.WeakReference<DestinationGate> {
        final String origin;

        GateReference(String origin, DestinationGate gate, java.lang.ref.ReferenceQueue<DestinationGate> queue) {
            super(gate, queue);
            this.origin = origin;
        }
    }

    /** A response's status and its {@code Retry-After} header (null when absent). */
    public record Response(int status, String retryAfter) {
    }

    /**
     * One POST with the Standard Webhooks headers (signed when the destination has secrets), the
     * format's headers and the destination's own; waits at most {@code timeout} for the whole
     * response.
     *
     * @throws IOException naming what failed (connection, TLS, timeout), without the destination's credentials
     */
    public Response post(Destination.Webhook destination, String id, byte[] body, String contentType,
            Map<String, String> formatHeaders, long timestamp, Duration timeout) throws IOException, InterruptedException {
        return await(postAsync(destination, id, body, contentType, formatHeaders, timestamp, timeout, false), timeout);
    }

    /** Waits for a request started by {@link #postAsync}; its failure as an IOException. */
    public static Response await(CompletableFuture<Response> response, Duration timeout)
            throws IOException, InterruptedException {
        try {
            // the request times itself out; this bound only guards against a lost completion
            return response.get(timeout.toMillis() + 5_000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            throw cause instanceof IOException io ? io : new IOException(describe(cause), cause);
        } catch (TimeoutException e) {
            response.cancel(false);
            throw new IOException("no response within " + timeout.toMillis() + " ms");
        }
    }

    /**
     * {@link #post} without waiting: the future completes on the channel's event loop with the
     * response, or exceptionally with an IOException naming what failed. With {@code publicOnly},
     * the destination's name is resolved first and the request goes to the address it resolved to,
     * once {@link DestinationPolicy} allows that address: what is checked is what is connected to.
     */
    public CompletableFuture<Response> postAsync(Destination.Webhook destination, String id, byte[] body,
            String contentType, Map<String, String> formatHeaders, long timestamp, Duration timeout, boolean publicOnly) {
        return postAsync(gate(destination.url()), destination, id, body, contentType, formatHeaders, timestamp, timeout,
                publicOnly);
    }

    /** {@link #postAsync}, with the destination's gate at hand ({@link #gate}): it picks the channel. */
    CompletableFuture<Response> postAsync(DestinationGate gate, Destination.Webhook destination, String id, byte[] body,
            String contentType, Map<String, String> formatHeaders, long timestamp, Duration timeout, boolean publicOnly) {
        URI url = destination.url();
        CompletableFuture<Response> result = new CompletableFuture<>();
        RequestOptions options;
        try {
            options = new RequestOptions().setMethod(HttpMethod.POST).setAbsoluteURI(parsed(url))
                    .setFollowRedirects(false).setIdleTimeout(timeout.toMillis())
                    .putHeader("content-type", contentType)
                    .putHeader("user-agent", "walhook")
                    .putHeader("webhook-id", id)
                    .putHeader("webhook-timestamp", Long.toString(timestamp));
        } catch (IOException | RuntimeException e) {
            result.completeExceptionally(new IOException("not a URL walhook can post to: " + destination.redact(describe(e))));
            return result;
        }
        if (!destination.secrets().isEmpty()) {
            options.putHeader("webhook-signature", WebhookSigner.sign(destination.secrets(), id, timestamp, body));
        }
        formatHeaders.forEach(options::putHeader);
        destination.headers().forEach(options::putHeader);
        // the channel with the fewest requests to this destination under way: no pool gets more than its
        // share of the gate's places (by calling thread, two lane threads of one parity sent all to one pool)
        int picked = gate.channel();
        result.whenComplete((r, e) -> gate.channelDone(picked));
        Channel channel = channels[picked];
        HttpClient client = "https".equalsIgnoreCase(url.getScheme()) ? channel.tls() : channel.plain();
        channel.context().runOnContext(start -> {
            if (result.isDone()) {
                return; // given up before it started: no connection to a host that may be hung
            }
            try {
                java.util.concurrent.atomic.AtomicReference<Response> answered = new java.util.concurrent.atomic.AtomicReference<>();
                long timer = vertx.setTimer(timeout.toMillis(), late -> {
                    Response status = answered.get();
                    if (status != null) {
                        result.complete(status); // answered, and its body did not end in time: the status stands
                    } else {
                        result.completeExceptionally(new NoResponse(timeout));
                    }
                });
                result.whenComplete((r, e) -> vertx.cancelTimer(timer));
                String named = UrlAuthority.host(url);
                String host = named.startsWith("[") ? named.substring(1, named.length() - 1) : named;
                if (publicOnly || lookups != null && !literal(host)) {
                    // looked up first: to check the address connected to, or off the event loop (HostLookups)
                    address(host).whenComplete((address, failure) -> onContext(channel.context(), () -> {
                        try {
                            if (result.isDone()) {
                                return; // timed out while its name was looked up
                            }
                            if (failure != null) {
                                Throwable cause = failure instanceof java.util.concurrent.CompletionException
                                        && failure.getCause() != null ? failure.getCause() : failure;
                                result.completeExceptionally(new IOException(destination.redact(host
                                        + " does not resolve: " + describe(cause))));
                                return;
                            }
                            java.util.Optional<String> refusal = publicOnly ? DestinationPolicy.refusal(address)
                                    : java.util.Optional.empty();
                            if (refusal.isPresent()) {
                                result.completeExceptionally(new IOException(destination.redact(host + " resolves to "
                                        + refusal.get() + "; not connecting (WALHOOK_ALLOW_PRIVATE_DESTINATIONS=true allows it)")));
                                return;
                            }
                            int given = UrlAuthority.port(url);
                            int port = given > 0 ? given : "https".equalsIgnoreCase(url.getScheme()) ? 443 : 80;
                            options.setServer(SocketAddress.inetSocketAddress(port, address.getHostAddress()));
                            if (lookups != null) {
                                // no answer from this address (refused, reset, timed out): the name's next one
                                result.whenComplete((r, e) -> {
                                    if (e != null) {
                                        lookups.failed(host, address);
                                    }
                                });
                            }
                            send(gate, destination, client, options, body, answered, result);
                        } catch (RuntimeException e) {
                            result.completeExceptionally(new IOException(destination.redact(describe(e)))); // at once
                        }
                    }));
                } else {
                    send(gate, destination, client, options, body, answered, result);
                }
            } catch (RuntimeException e) {
                result.completeExceptionally(new IOException(destination.redact(describe(e)))); // at once, not as a timeout
            }
        });
        return result;
    }

    /**
     * One of {@code host}'s addresses: from {@link HostLookups} where Vert.x would look it up on
     * the event loop, else from Vert.x's own resolver (which does not block).
     */
    private CompletableFuture<java.net.InetAddress> address(String host) {
        if (lookups != null) {
            return lookups.next(host);
        }
        CompletableFuture<java.net.InetAddress> address = new CompletableFuture<>();
        ((VertxInternal) vertx).resolveAddress(host, resolved -> {
            if (resolved.succeeded()) {
                address.complete(resolved.result());
            } else {
                address.completeExceptionally(resolved.cause());
            }
        });
        return address;
    }

    /** Runs {@code work} on {@code context}: at once when this is its thread. */
    private static void onContext(Context context, Runnable work) {
        if (Vertx.currentContext() == context) {
            work.run();
        } else {
            context.runOnContext(v -> work.run());
        }
    }

    /**
     * Whether a response's {@code Keep-Alive} header has Vert.x keep its connection for good: the
     * first {@code timeout=} parameter Vert.x reads (digits 0 to 8 only, as Vert.x 4.5 parses them)
     * is 0, the receiver keeps an idle connection no time at all, and Vert.x takes 0 for "never
     * expires". Such connections stayed in the pools as long as walhook ran, one more for each
     * address a rotating host name gave.
     */
    static boolean keptForGood(String keepAlive) {
        if (keepAlive == null) {
            return false;
        }
        for (String parameter : keepAlive.split(",")) {
            String trimmed = parameter.strip();
            if (trimmed.regionMatches(true, 0, "timeout=", 0, "timeout=".length())) {
                String value = trimmed.substring("timeout=".length());
                if (!value.isEmpty() && value.chars().allMatch(c -> c >= '0' && c < '9')) {
                    return value.chars().allMatch(c -> c == '0'); // the one Vert.x took
                }
            }
        }
        return false;
    }

    /** An IP address written as a host: IPv6, or four decimal parts of 0 to 255 (no look-up). */
    static boolean literal(String host) {
        if (host.indexOf(':') >= 0) {
            return true; // IPv6
        }
        String[] parts = host.split("\\.", -1);
        if (parts.length != 4) {
            return false;
        }
        for (String part : parts) {
            if (part.isEmpty() || part.length() > 3 || !part.chars().allMatch(c -> c >= '0' && c <= '9')
                    || Integer.parseInt(part) > 255) {
                return false;
            }
        }
        return true;
    }

    /**
     * Sends the request; {@code answered} gets the status line's outcome as soon as it comes. The
     * status is the outcome: a 2xx was taken, whatever its body does next (a Content-Length larger
     * than what comes, an endless stream, a connection broken off). The body is read and dropped
     * until it ends, {@link #BODY_WAIT} or the request's timeout runs out, or it passes
     * {@link #DRAINED_BYTES}; cut short, its connection is closed. The result, and the destination's
     * place, wait for that.
     */
    private void send(DestinationGate gate, Destination.Webhook destination, HttpClient client, RequestOptions options,
            byte[] body, java.util.concurrent.atomic.AtomicReference<Response> answered, CompletableFuture<Response> result) {
        client.request(options).compose(request -> {
            if (request.version() == HttpVersion.HTTP_2) {
                // as many requests at once as the server's streams on the connections each pool keeps to it
                long streams = request.connection().remoteSettings().getMaxConcurrentStreams();
                gate.fitTo((int) Math.min(Integer.MAX_VALUE, streams * (POOL_SIZE / 8) * channels.length));
            }
            // a request given up on (timed out, cancelled) frees its connection (HTTP/1.1: closes it)
            result.whenComplete((r, e) -> {
                if (e != null) {
                    request.reset();
                    if (e instanceof NoResponse && request.version() == HttpVersion.HTTP_2) {
                        checkAlive(request.connection(), ((NoResponse) e).timeout); // the reset ended its stream only
                    }
                }
            });
            return request.send(Buffer.buffer(Unpooled.wrappedBuffer(body)));
        }).compose(r -> {
            // the body's end is awaited below: a reset on closing (an interim answer, a body cut short) is ours
            r.exceptionHandler(e -> LOG.debugf("a webhook response was cut off: %s", destination.redact(describe(e))));
            if (r.statusCode() < 200) {
                // an interim answer other than 100 and 103 (102 Processing, ...), which the client takes as the
                // final one: its connection would give the next request this one's final answer
                if (r.version() == io.vertx.core.http.HttpVersion.HTTP_2) {
                    r.request().reset();
                } else {
                    r.request().connection().close();
                }
                return io.vertx.core.Future.failedFuture(new IOException("the receiver answered " + r.statusCode()
                        + ", an interim status walhook cannot wait past; the connection is closed"));
            }
            Response status = new Response(r.statusCode(), r.getHeader("retry-after"));
            answered.set(status);
            // a body still coming after BODY_WAIT (trickled, endless) is cut short: waited for until the request's
            // timeout, each request of a receiver that trickles its answers took that long, its events waiting
            long bodyWait = vertx.setTimer(BODY_WAIT.toMillis(), late -> result.complete(status));
            result.whenComplete((done, e) -> vertx.cancelTimer(bodyWait));
            if (r.version() != HttpVersion.HTTP_2 && keptForGood(r.getHeader("keep-alive"))) {
                // Vert.x keeps such a connection in its pool for good: closed once this response ends, as after
                // "Connection: close" (the receiver said it may close it the moment it is idle anyway)
                r.request().connection().shutdown(options.getIdleTimeout(), TimeUnit.MILLISECONDS);
            }
            boolean[] ended = {false};
            long[] read = {0};
            try {
                r.handler(chunk -> {
                    read[0] += chunk.length();
                    if (read[0] > DRAINED_BYTES) {
                        result.complete(status);
                    }
                });
            } catch (IllegalStateException alreadyEnded) {
                return io.vertx.core.Future.succeededFuture(status);
            }
            result.whenComplete((done, e) -> {
                if (!ended[0]) {
                    r.request().reset(); // cut short: the connection is not used again
                }
            });
            return r.end().map(done -> {
                ended[0] = true;
                return status;
            }).otherwise(status); // broken off after the status line: the status stands
        }).onComplete(done -> {
            if (done.succeeded()) {
                result.complete(done.result());
            } else {
                // the client's messages may quote the request (a timeout names its method and path with
                // the query string): what the log, /status and dead letters show is redacted, and the
                // cause, which would show it whole in a stack trace, is not kept
                Throwable cause = done.cause();
                result.completeExceptionally(new IOException(cause.getClass().getSimpleName()
                        + (cause.getMessage() == null ? "" : ": " + destination.redact(cause.getMessage()))));
            }
        });
    }

    /** No response, not even its status line, within the request's timeout. */
    private static final class NoResponse extends IOException {
        final transient Duration timeout;

        NoResponse(Duration timeout) {
            super("no response within " + timeout.toMillis() + " ms");
            this.timeout = timeout;
        }
    }

    /** How long an HTTP/2 connection a request timed out on has to answer a ping before it is taken out of use. */
    static final Duration PING_TIMEOUT = Duration.ofSeconds(5);

    /** HTTP/2 connections being asked whether they are there ({@link #checkAlive}). */
    private final java.util.Set<io.vertx.core.http.HttpConnection> pinged = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /**
     * A request timed out on this HTTP/2 connection: it is pinged, and taken out of the pool unless
     * the pong comes within {@link #PING_TIMEOUT}. A connection that went silent (a NAT entry lost,
     * a front end frozen while its kernel still acknowledges) stayed in the pool, which put every
     * request to the host on it, each timing out, for as long as TCP did not give up: a reset ends
     * a stream only. It is shut down, not closed: new requests go on a new connection, and those
     * under way on it (whose pong may only be late, behind large bodies) end as they would, within
     * {@code requestTimeout}, rather than fail now and be sent again. A connection that answers the
     * ping is only slow, and stays.
     */
    private void checkAlive(io.vertx.core.http.HttpConnection connection, Duration requestTimeout) {
        if (!pinged.add(connection)) {
            return; // asked already: by another of its requests that timed out
        }
        java.util.concurrent.atomic.AtomicBoolean answered = new java.util.concurrent.atomic.AtomicBoolean();
        long timer = vertx.setTimer(PING_TIMEOUT.toMillis(), late -> {
            if (!answered.get()) {
                LOG.debugf("an HTTP/2 webhook connection did not answer a ping within %d ms after a request on it timed"
                        + " out: shut down", PING_TIMEOUT.toMillis());
                connection.shutdown(requestTimeout.toMillis(), TimeUnit.MILLISECONDS);
            }
            pinged.remove(connection);
        });
        try {
            connection.ping(Buffer.buffer(new byte[8])).onComplete(pong -> {
                if (pong.succeeded()) {
                    answered.set(true);
                    vertx.cancelTimer(timer);
                    pinged.remove(connection);
                }
            });
        } catch (RuntimeException closed) {
            // closed already: nothing to ask
        }
    }

    /** An exception as a log line: its class and message, never a URL's query or credentials. */
    static String describe(Throwable e) {
        return e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
    }

    private java.net.URL parsed(URI url) throws IOException {
        java.net.URL parsed = urls.get(url);
        if (parsed == null) {
            parsed = url.toURL();
            if (urls.size() >= 256) {
                urls.clear(); // destinations changed many times: start over rather than grow
            }
            urls.put(url, parsed);
        }
        return parsed;
    }

    @Override
    public void close() {
        if (lookups != null) {
            lookups.close();
        }
        java.util.List<CompletableFuture<Void>> closing = new java.util.ArrayList<>();
        for (Channel channel : channels) {
            closing.add(channel.plain().close().toCompletionStage().toCompletableFuture());
            closing.add(channel.tls().close().toCompletionStage().toCompletableFuture());
        }
        // until every connection is closed (requests under way cut): a clean stop then sends nothing after it
        try {
            CompletableFuture.allOf(closing.toArray(CompletableFuture[]::new)).get(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException e) {
            // closed as far as it goes; the process ends anyway
        }
    }
}
