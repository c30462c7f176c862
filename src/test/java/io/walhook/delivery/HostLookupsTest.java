package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Host names looked up off the event loops: one look-up per name at a time, answers kept and
 * refreshed in the background, addresses in turn, and a name whose look-up hangs holding up only
 * itself.
 */
class HostLookupsTest {

    private final Map<String, Integer> calls = new ConcurrentHashMap<>();
    private final CountDownLatch hung = new CountDownLatch(1);
    private final AtomicLong now = new AtomicLong(1_000_000);
    private final HostLookups lookups = new HostLookups(this::resolve, now::get);

    private InetAddress[] resolve(String host) throws UnknownHostException {
        calls.merge(host, 1, Integer::sum);
        if (host.startsWith("hung")) {
            try {
                hung.await(); // a DNS server that does not answer
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            throw new UnknownHostException(host);
        }
        switch (host) {
            case "error.example" -> throw new StackOverflowError("not an exception");
            case "two.example" -> {
                return new InetAddress[] {InetAddress.getByAddress(host, new byte[] {10, 0, 0, 1}),
                        InetAddress.getByAddress(host, new byte[] {10, 0, 0, 2})};
            }
            case "one.example" -> {
                return new InetAddress[] {InetAddress.getByAddress(host, new byte[] {10, 0, 0, 9})};
            }
            default -> throw new UnknownHostException(host);
        }
    }

    @AfterEach
    void close() {
        hung.countDown();
        lookups.close();
    }

    @Test
    void aNamesRequestsGoToOneAddressUntilARequestToItFails() throws Exception {
        assertThat(address("two.example")).isEqualTo("10.0.0.1");
        assertThat(address("two.example")).isEqualTo("10.0.0.1");
        lookups.failed("two.example", InetAddress.getByName("10.0.0.1"));
        assertThat(address("two.example")).isEqualTo("10.0.0.2");
        lookups.failed("two.example", InetAddress.getByName("10.0.0.1")); // a request to the first that failed later
        assertThat(address("two.example")).as("moved on once").isEqualTo("10.0.0.2");
        // looked up again, the address in use stays in use
        now.addAndGet(HostLookups.FRESH_MILLIS);
        lookups.next("two.example");
        await().atMost(Duration.ofSeconds(10)).until(() -> calls.get("two.example") == 2 && !lookups.lookingUp("two.example"));
        assertThat(address("two.example")).isEqualTo("10.0.0.2");
        lookups.failed("two.example", InetAddress.getByName("10.0.0.2"));
        assertThat(address("two.example")).isEqualTo("10.0.0.1");
    }

    private String address(String host) throws Exception {
        return lookups.next(host).get(10, TimeUnit.SECONDS).getHostAddress();
    }

    /** Every thread held by a name whose look-up hangs: a name answered before still serves. */
    /**
     * Many names whose look-ups hang (a DNS provider down for a few hundred tenants' domains, their
     * lanes retrying) keep every thread and a queue of look-ups: a name answered before serves at
     * once, and is looked up again ahead of them, on threads of its own. Behind them, it was not
     * by the time its answer went stale, and its requests then waited in the same queue.
     */
    @Test
    void aNameAnsweredBeforeServesWhileEveryThreadWaitsOnHungLookUps() throws Exception {
        assertThat(address("one.example")).isEqualTo("10.0.0.9");
        List<CompletableFuture<InetAddress>> waiting = new ArrayList<>();
        for (int i = 0; i < 2 * HostLookups.THREADS; i++) {
            waiting.add(lookups.next("hung-" + i + ".example"));
        }
        await().atMost(Duration.ofSeconds(10)).until(() -> calls.keySet().stream().filter(h -> h.startsWith("hung")).count()
                == HostLookups.THREADS);
        now.addAndGet(HostLookups.FRESH_MILLIS); // due to be looked up again
        assertThat(lookups.next("one.example")).as("its answer, at once").isCompleted();
        await().atMost(Duration.ofSeconds(10)).until(() -> calls.get("one.example") == 2 && !lookups.lookingUp("one.example"));
        now.addAndGet(HostLookups.STALE_MILLIS - 1); // the answer looked up again serves; the first would be stale
        assertThat(lookups.next("one.example")).as("the new answer, at once").isCompleted();
        assertThat(waiting).noneMatch(CompletableFuture::isDone);
    }

    @Test
    void aLookUpThatThrowsAnErrorFailsItsCallersAndIsTriedAgain() {
        CompletableFuture<InetAddress> first = lookups.next("error.example");
        await().atMost(Duration.ofSeconds(10)).until(first::isDone);
        assertThat(first).isCompletedExceptionally();
        CompletableFuture<InetAddress> second = lookups.next("error.example");
        await().atMost(Duration.ofSeconds(10)).until(second::isDone);
        assertThat(calls).containsEntry("error.example", 2);
    }

    @Test
    void namesWhoseLookUpsHangHoldUpNoOtherName() throws Exception {
        List<CompletableFuture<InetAddress>> waiting = new ArrayList<>();
        for (int i = 0; i < 3 * HostLookups.THREADS; i++) {
            waiting.add(lookups.next("hung.example")); // one look-up, however often it is asked for
        }
        await().atMost(Duration.ofSeconds(10)).until(() -> calls.getOrDefault("hung.example", 0) == 1);
        assertThat(lookups.next("one.example").get(10, TimeUnit.SECONDS).getHostAddress()).isEqualTo("10.0.0.9");
        assertThat(waiting).noneMatch(CompletableFuture::isDone);
        hung.countDown();
        await().atMost(Duration.ofSeconds(10)).until(() -> waiting.stream().allMatch(CompletableFuture::isCompletedExceptionally));
    }

    @Test
    void anAnswerServesWhileItIsLookedUpAgainAndNoLongerOnceStale() throws Exception {
        assertThat(lookups.next("one.example").get(10, TimeUnit.SECONDS)).isNotNull();
        now.addAndGet(HostLookups.FRESH_MILLIS);
        assertThat(lookups.next("one.example")).as("the old answer, at once").isCompleted();
        await().atMost(Duration.ofSeconds(10)).until(() -> calls.get("one.example") == 2 // looked up again meanwhile
                && !lookups.lookingUp("one.example"));
        now.addAndGet(HostLookups.STALE_MILLIS);
        calls.clear();
        assertThat(lookups.next("one.example").get(10, TimeUnit.SECONDS).getHostAddress()).isEqualTo("10.0.0.9");
        assertThat(calls).containsEntry("one.example", 1);
    }

    @Test
    void aNameThatDoesNotResolveFailsItsCaller() {
        CompletableFuture<InetAddress> address = lookups.next("nowhere.example");
        await().atMost(Duration.ofSeconds(10)).until(address::isDone);
        assertThat(address).isCompletedExceptionally();
        assertThat(WebhookClient.literal("10.1.2.3")).isTrue();
        assertThat(WebhookClient.literal("::1")).isTrue();
        assertThat(WebhookClient.literal("hooks.example.com")).isFalse();
        assertThat(WebhookClient.literal("1e100.net")).isFalse();
        assertThat(WebhookClient.literal("1.2.3.4.nip.io")).isFalse();
        assertThat(WebhookClient.literal("10.0.0.1.")).isFalse();
        assertThat(WebhookClient.literal("300.1.1.1")).isFalse();
    }
}
