package io.walhook.delivery;

import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Carries one request to one subscription's destination and says how it ended. The lane owns
 * ordering, batching, retries and the durable queue; a transport only makes the attempt, without
 * holding a thread while it is under way.
 */
public interface Transport {

    /** How an attempt ended, decided once. */
    enum Outcome { DELIVERED, RETRY, GONE }

    /**
     * The outcome, how long the destination asked us to wait, and what went wrong (for logs and /status);
     * {@code pacesAll}: whether that wait speaks for the destination as a whole (a webhook's 429 or 5xx),
     * not only for this request (a row it refuses, with a {@code Retry-After} as well).
     */
    record Attempt(Outcome outcome, Optional<Duration> retryAfter, String problem, boolean pacesAll) {

        public Attempt(Outcome outcome, Optional<Duration> retryAfter, String problem) {
            this(outcome, retryAfter, problem, true);
        }

        /** The longest problem kept: the rest of a receiver's or broker's text is cut off. */
        static final int PROBLEM_LENGTH = 500;

        /**
         * The problem goes to the log, {@code /status} and dead letters, and can quote what a receiver
         * or broker sent (a status line walhook could not read): its control characters (a terminal's
         * escape sequences, line breaks) are written as {@code \\uXXXX}, and it is cut to
         * {@link #PROBLEM_LENGTH} characters.
         */
        public Attempt {
            problem = shown(problem);
        }

        static String shown(String text) {
            if (text == null || text.length() <= PROBLEM_LENGTH && !hasControl(text)) {
                return text;
            }
            StringBuilder shown = new StringBuilder(PROBLEM_LENGTH + 8);
            int i = 0;
            for (; i < text.length() && shown.length() < PROBLEM_LENGTH; i++) {
                char c = text.charAt(i);
                if (control(c)) {
                    shown.append(String.format("\\u%04x", (int) c));
                } else {
                    shown.append(c);
                }
            }
            if (i < text.length() || shown.length() > PROBLEM_LENGTH) {
                int cut = PROBLEM_LENGTH - 3;
                shown.setLength(Character.isHighSurrogate(shown.charAt(cut - 1)) ? cut - 1 : cut); // not half a character
                shown.append("...");
            }
            return shown.toString();
        }

        private static boolean hasControl(String text) {
            for (int i = 0; i < text.length(); i++) {
                if (control(text.charAt(i))) {
                    return true;
                }
            }
            return false;
        }

        private static boolean control(int c) {
            return c < 0x20 || (c >= 0x7f && c <= 0x9f);
        }

        public static Attempt retry(String problem) {
            return new Attempt(Outcome.RETRY, Optional.empty(), problem);
        }

        public static final Attempt DELIVERED = new Attempt(Outcome.DELIVERED, Optional.empty(), null);
    }

    /**
     * What goes over the wire: one event, or a batch's JSON array of events; {@code address} is the
     * AMQP address the event resolved to (null for webhooks).
     */
    record Request(String id, byte[] body, String contentType, Map<String, String> headers, String address) {
    }

    /**
     * The limit on requests under way to this destination that lanes share, or null when there is
     * none (AMQP: one connection for every subscription, whose messages wait for the broker's
     * credit in the client).
     */
    default DestinationGate gate() {
        return null;
    }

    /**
     * Sends the request once; the future completes with its outcome, never exceptionally. The
     * caller may complete it first, to give the request up (its destination was replaced or its
     * subscription deleted): the transport then stops it where it can (a webhook request is reset,
     * its connection closed) and its late outcome is dropped.
     */
    CompletableFuture<Attempt> send(Request request);

    /** {@link #send}, waiting at most {@code timeout} for the outcome (the API's test-fire). */
    default Attempt attempt(Request request, Duration timeout) throws InterruptedException {
        CompletableFuture<Attempt> outcome = send(request);
        try {
            return outcome.get(timeout.toMillis() + 5_000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            return Attempt.retry(String.valueOf(e.getCause()));
        } catch (TimeoutException e) {
            return Attempt.retry("no outcome within " + timeout);
        }
    }
}
