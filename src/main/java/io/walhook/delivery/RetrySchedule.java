package io.walhook.delivery;

import java.time.Duration;
import java.util.Optional;
import java.util.random.RandomGenerator;

/**
 * When a failed request is tried again, for one subscription's destination: exponential backoff
 * from {@value #FIRST_MILLIS} ms with full jitter, up to the maximum backoff, and never sooner than
 * a destination's {@code Retry-After} asked (bounded by the longest wait). The backoff grows with
 * the destination's failures in a row, and a success resets it: a request that fails while others
 * succeed is tried again at the short pace, its first {@value #QUICK_RETRIES} retries at least;
 * beyond those its own failures grow its backoff too, so one event the destination always refuses
 * is not tried ten times a second. While every attempt fails (the last
 * {@value #STREAK} or more failed, {@value #DIFFERENT} different requests among them, and nothing
 * succeeded for {@link #SILENCE}) one request at a time
 * probes the destination, its backoff growing to the probe interval (seconds, whatever the
 * maximum backoff): a destination that is down is not hammered, and one that recovers after an
 * outage of hours gets its backlog within that interval, not minutes later. One success resets
 * that, and a destination that fails only some requests is retried at the short pace.
 *
 * <p>Pure: no clock of its own, no threads; the caller says what happened when, and gets a wait back.
 */
final class RetrySchedule {

    static final long FIRST_MILLIS = 200;
    /** The shortest wait: a jittered backoff near zero is no backoff. */
    static final long SHORTEST_MILLIS = 50;
    /**
     * Failures in a row, with no success between, after which every attempt counts as failing: a
     * destination failing even 30% of requests has ten in a row about once in 170,000 attempts.
     */
    static final int STREAK = 10;
    /**
     * Different requests that must have failed, besides the streak, before every attempt counts as
     * failing: one request the destination refuses again and again (a row it will never take), alone
     * in a quiet subscription, is not a destination that is down, and the changes to other rows after
     * it go at once rather than at a probe's pace (which that request's {@code Retry-After} can put
     * minutes off).
     */
    static final int DIFFERENT = 3;
    /**
     * Retries of one request at the destination's pace before its own failures grow its backoff: a
     * destination failing 30% of requests fails one request seven times about once in 4,500.
     */
    static final int QUICK_RETRIES = 6;
    /** How long without a success, besides the streak, before every attempt counts as failing. */
    static final Duration SILENCE = Duration.ofSeconds(2);

    /**
     * The longest {@code Retry-After} honoured (or the probe interval or maximum backoff, if longer):
     * a destination asking for a pause of a few minutes gets it; one asking for days is tried again
     * sooner.
     */
    static final Duration RETRY_AFTER_LIMIT = Duration.ofMinutes(5);

    private long maxBackoffMillis;
    private long probeMillis;
    private long retryAfterLimitMillis;
    private int failuresInARow;
    /** The different requests that failed since the last success, the first {@value #DIFFERENT} of them. */
    private final String[] failedRequests = new String[DIFFERENT];
    private int differentFailed;
    private java.time.Instant lastSuccess = java.time.Instant.MIN;

    /**
     * @param maxBackoff the longest backoff while the destination takes some requests
     * @param probeInterval the longest backoff while it takes none (one request at a time probes it)
     */
    RetrySchedule(Duration maxBackoff, Duration probeInterval) {
        limits(maxBackoff, probeInterval);
    }

    /** New limits (the subscription's retry settings changed); what happened so far still counts. */
    void limits(Duration maxBackoff, Duration probeInterval) {
        this.maxBackoffMillis = Math.max(1, saturatedMillis(maxBackoff));
        this.probeMillis = Math.max(1, saturatedMillis(probeInterval));
        this.retryAfterLimitMillis = Math.max(RETRY_AFTER_LIMIT.toMillis(), Math.max(maxBackoffMillis, probeMillis));
    }

    /**
     * The destination took a request at {@code now}. Returns whether that ends a time when every
     * attempt failed (the destination is back: what waits should be tried again now).
     */
    boolean succeeded(java.time.Instant now) {
        boolean recovered = everyAttemptFailing(now);
        reset();
        lastSuccess = now;
        return recovered;
    }

    /** Forget the failures so far (an operator's replay): the next attempts go at once, at the short pace. */
    void reset() {
        failuresInARow = 0;
        java.util.Arrays.fill(failedRequests, null);
        differentFailed = 0;
    }

    /**
     * A request failed: {@code request} names it, the same at each of its attempts (its first event's
     * id: a batch split in halves is still the same request in its first half, and so are events read
     * back from the durable queue after a pause).
     */
    void failed(String request) {
        if (failuresInARow < Integer.MAX_VALUE) {
            failuresInARow++;
        }
        if (differentFailed < DIFFERENT) {
            for (int i = 0; i < differentFailed; i++) {
                if (failedRequests[i].equals(request)) {
                    return;
                }
            }
            failedRequests[differentFailed++] = request;
        }
    }

    /** Whether the last attempt failed. */
    boolean lastFailed() {
        return failuresInARow > 0;
    }

    /**
     * Whether the last {@value #STREAK} or more attempts failed, {@value #DIFFERENT} different requests
     * among them, and nothing succeeded for {@link #SILENCE} until {@code now}.
     */
    boolean everyAttemptFailing(java.time.Instant now) {
        return failuresInARow >= STREAK && differentFailed >= DIFFERENT && !now.isBefore(lastSuccess.plus(SILENCE));
    }

    /**
     * How long to wait before attempt {@code failedAttempts + 1} at a request that failed
     * {@code failedAttempts} times, given what the destination asked for.
     */
    Duration delay(int failedAttempts, Optional<Duration> retryAfter, java.time.Instant now, RandomGenerator random) {
        // while every attempt fails, the probe interval; while nothing succeeded for a while, though the failures in a
        // row are fewer than a streak, not longer than it either (a destination that went down a minute ago and is
        // back is not left for the maximum backoff); else the maximum backoff
        long cap = everyAttemptFailing(now) ? probeMillis
                : failuresInARow > 0 && !now.isBefore(lastSuccess.plus(SILENCE)) ? Math.min(maxBackoffMillis, probeMillis)
                : maxBackoffMillis;
        // the destination's failures in a row, or this request's own beyond its quick retries
        long own = Math.max((long) failedAttempts - 1, 0);
        long grown = Math.max(Math.max(failuresInARow - 1, 0), own - QUICK_RETRIES);
        int doublings = (int) Math.min(Math.min(own, grown), 40);
        long backoff = Math.min(cap, FIRST_MILLIS << doublings);
        long wait = Math.max(random.nextLong(backoff + 1), Math.min(SHORTEST_MILLIS, backoff));
        if (retryAfter.isPresent()) {
            // not before the destination asked, within reason
            wait = Math.min(Math.max(wait, saturatedMillis(retryAfter.get())), retryAfterLimitMillis);
        }
        return Duration.ofMillis(wait);
    }

    /** Milliseconds of a duration, Long.MAX_VALUE for one too long to count in them (never an ArithmeticException). */
    static long saturatedMillis(Duration duration) {
        if (duration.isNegative()) {
            return 0;
        }
        return duration.getSeconds() >= Long.MAX_VALUE / 1000 - 1 ? Long.MAX_VALUE : duration.toMillis();
    }
}
