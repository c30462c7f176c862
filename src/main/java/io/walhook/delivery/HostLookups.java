package io.walhook.delivery;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

/**
 * Destinations' host names looked up with the system's resolver (the JDK's, blocking) on threads
 * of their own, where Vert.x would look them up on the event loop that connects: the native
 * executable (Quarkus builds it with that resolver) and a JVM started with
 * {@code QUARKUS_VERTX_USE_ASYNC_DNS=false}. A name whose DNS server does not answer then holds
 * one of these threads, not the loops every request, API call and health check shares.
 *
 * <p>One look-up per name at a time, whoever asks. An answer serves for {@link #FRESH_MILLIS};
 * after that it is looked up again in the background while the old answer still serves (for
 * {@link #STALE_MILLIS} at most), so a name that resolved once does not wait behind names whose
 * look-ups hang. A name whose last look-up gave an answer is looked up again on threads of its
 * own, {@link #THREADS} of them, beside as many for the others: names whose look-ups hang do not
 * hold it back either. A name's requests go to one of its addresses, the first in the resolver's order
 * (IPv4 before IPv6 unless the JVM prefers IPv6), until a request to it fails without an answer:
 * then to the next, so that while one refuses or does not answer, retries reach the others.
 */
final class HostLookups implements AutoCloseable {

    static final long FRESH_MILLIS = 30_000;
    static final long STALE_MILLIS = 300_000;
    /** Look-ups at once of each kind, at most: each hung one holds a thread for the resolver's timeouts. */
    static final int THREADS = 8;

    /** A name's answer, when it came, and which of its addresses requests go to. */
    private record Answer(InetAddress[] addresses, long at, AtomicInteger current) {
    }

    @FunctionalInterface
    interface Resolver {
        InetAddress[] resolve(String host) throws UnknownHostException;
    }

    private final Resolver resolver;
    private final LongSupplier millis;
    /** Look-ups of names whose last look-up gave an answer. */
    private final ExecutorService threads;
    /**
     * Look-ups of the others: names never answered, or whose last look-up failed. Many such names
     * hanging together (a DNS provider down for a few hundred tenants' domains, their lanes
     * retrying every few seconds) kept every thread and a queue of look-ups, behind which a name
     * that resolves was looked up again only after its answer went stale.
     */
    private final ExecutorService unanswered;
    /** Names whose last look-up failed. */
    private final java.util.Set<String> failing = ConcurrentHashMap.newKeySet();
    private final Map<String, Answer> answers = new ConcurrentHashMap<>();
    private final Map<String, CompletableFuture<Answer>> underWay = new ConcurrentHashMap<>();

    HostLookups() {
        this(InetAddress::getAllByName, System::currentTimeMillis);
    }

    HostLookups(Resolver resolver, LongSupplier millis) {
        this.resolver = resolver;
        this.millis = millis;
        AtomicInteger count = new AtomicInteger();
        this.threads = pool(count);
        this.unanswered = pool(count);
    }

    private static ExecutorService pool(AtomicInteger count) {
        ThreadPoolExecutor pool = new ThreadPoolExecutor(THREADS, THREADS, 60, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                runnable -> {
                    Thread thread = new Thread(runnable, "walhook-dns-" + count.incrementAndGet());
                    thread.setDaemon(true);
                    return thread;
                });
        pool.allowCoreThreadTimeOut(true); // none while nothing is looked up
        return pool;
    }

    /**
     * The address {@code host}'s requests go to now: at once from a recent answer, else when its
     * look-up ends; an {@link UnknownHostException} when it does not resolve.
     */
    CompletableFuture<InetAddress> next(String host) {
        Answer answer = answers.get(host);
        long now = millis.getAsLong();
        if (answer != null && now - answer.at() < STALE_MILLIS) {
            if (now - answer.at() >= FRESH_MILLIS) {
                lookUp(host); // again, in the background; the old answer serves meanwhile
            }
            return CompletableFuture.completedFuture(pick(answer));
        }
        return lookUp(host).thenApply(HostLookups::pick);
    }

    private CompletableFuture<Answer> lookUp(String host) {
        CompletableFuture<Answer> mine = new CompletableFuture<>();
        CompletableFuture<Answer> running = underWay.putIfAbsent(host, mine);
        if (running != null) {
            return running;
        }
        try {
            (answers.containsKey(host) && !failing.contains(host) ? threads : unanswered).execute(() -> {
                try {
                    InetAddress[] addresses = resolver.resolve(host);
                    if (addresses.length == 0) {
                        throw new UnknownHostException(host + ": no address");
                    }
                    Answer before = answers.get(host);
                    int using = 0; // the address requests go to stays theirs if the new answer has it
                    for (int i = 0; before != null && i < addresses.length; i++) {
                        if (addresses[i].equals(pick(before))) {
                            using = i;
                        }
                    }
                    Answer answer = new Answer(addresses, millis.getAsLong(), new AtomicInteger(using));
                    answers.put(host, answer);
                    failing.remove(host);
                    underWay.remove(host, mine);
                    mine.complete(answer);
                } catch (Throwable e) { // whatever it throws, its callers hear of it: left undone, the name waited for good
                    failing.add(host);
                    underWay.remove(host, mine);
                    mine.completeExceptionally(e);
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException e) {
            underWay.remove(host, mine);
            mine.completeExceptionally(e); // closed
        }
        return mine;
    }

    private static InetAddress pick(Answer answer) {
        InetAddress[] addresses = answer.addresses();
        return addresses[Math.floorMod(answer.current().get(), addresses.length)];
    }

    /**
     * A request to {@code address}, one of {@code host}'s, failed without an answer (refused, reset,
     * timed out): the name's requests go to its next address, unless another failure moved them on.
     */
    void failed(String host, InetAddress address) {
        Answer answer = answers.get(host);
        if (answer == null) {
            return;
        }
        int current = answer.current().get();
        if (answer.addresses()[Math.floorMod(current, answer.addresses().length)].equals(address)) {
            answer.current().compareAndSet(current, current + 1);
        }
    }

    /** Whether a look-up of {@code host} is under way. */
    boolean lookingUp(String host) {
        return underWay.containsKey(host);
    }

    @Override
    public void close() {
        threads.shutdownNow();
        unanswered.shutdownNow();
        underWay.values().forEach(waiting -> waiting.completeExceptionally(new UnknownHostException("walhook stops")));
    }
}
