package io.walhook.routing;

import java.time.Duration;
import java.util.Optional;

/**
 * A subscription's own retry settings; each absent one falls back to the global
 * {@code WALHOOK_DELIVERY_*} value. A failing request is retried in memory until the window ends
 * or, when {@code maxAttempts} is set, until that many attempts failed, whichever comes first;
 * then it (and every later request of its lane) is parked.
 *
 * @param maxAttempts attempts before parking, 1 to {@link #MAX_ATTEMPTS}; absent: only the window limits them
 * @param maxBackoff the longest wait between two attempts, 1 ms to {@link #LONGEST_BACKOFF}
 * @param window how long a request is retried before it is parked, 1 ms to {@link #LONGEST_WINDOW}
 */
public record RetryPolicy(Optional<Integer> maxAttempts, Optional<Duration> maxBackoff, Optional<Duration> window) {

    /** Every value from the global settings. */
    public static final RetryPolicy DEFAULTS = new RetryPolicy(Optional.empty(), Optional.empty(), Optional.empty());
    public static final int MAX_ATTEMPTS = 1000;
    public static final Duration LONGEST_BACKOFF = Duration.ofDays(1);
    public static final Duration LONGEST_WINDOW = Duration.ofDays(7);

    public RetryPolicy {
        maxAttempts = maxAttempts == null ? Optional.empty() : maxAttempts;
        maxBackoff = maxBackoff == null ? Optional.empty() : maxBackoff;
        window = window == null ? Optional.empty() : window;
    }

    /** Whether every value comes from the global settings. */
    public boolean isDefault() {
        return maxAttempts.isEmpty() && maxBackoff.isEmpty() && window.isEmpty();
    }

    /**
     * Set together, a maximum backoff longer than the window is refused: no wait that long could
     * ever happen before the request is parked, so the setting would be a mistake.
     */
    public boolean backoffExceedsWindow() {
        return maxBackoff.isPresent() && window.isPresent() && maxBackoff.get().compareTo(window.get()) > 0;
    }
}
