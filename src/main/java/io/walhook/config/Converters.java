package io.walhook.config;

import java.time.Duration;
import java.util.Locale;

import org.eclipse.microprofile.config.spi.Converter;

import io.quarkus.runtime.configuration.DurationConverter;

/**
 * The strict converters of {@link WalhookConfig}'s typed values, and the rules they apply, shared
 * with the subscriptions' variables ({@code SubscriptionConfigReader}). A converter does not know
 * the property it converts: its {@link IllegalArgumentException} says what is wrong with the value
 * ({@code is '5x', not a duration; ...}) and {@link ConfigReport} puts the variable in front.
 */
public final class Converters {

    static final Duration SHORTEST = Duration.ofMillis(1);
    static final Duration HOUR = Duration.ofHours(1);
    static final Duration DAY = Duration.ofDays(1);
    static final Duration WEEK = Duration.ofDays(7);

    private Converters() {
    }

    /**
     * A duration such as {@code 500ms}, {@code 30s}, {@code 5m}, {@code 1h} or {@code PT1M}, longer
     * than zero (or zero, when {@code zeroAllowed}) and at most {@code longest}.
     */
    public static Duration duration(String value, boolean zeroAllowed, Duration longest) {
        String text = value == null ? "" : value.strip();
        Duration duration;
        try {
            duration = text.isEmpty() ? null : DurationConverter.parseDuration(text);
        } catch (RuntimeException e) {
            duration = null;
        }
        if (duration == null) {
            throw new IllegalArgumentException("is '" + text + "', not a duration; write e.g. 500ms, 30s, 5m, 1h or PT1M");
        }
        if (text.matches("[+-]?[0-9]+") && !duration.isZero()) {
            // Quarkus reads a bare number as seconds; beside settings in milliseconds (BATCH_MAX_WAIT_MS, the API's
            // *_ms), 60000 meant as a minute was 16 hours
            throw new IllegalArgumentException("is " + text + " without a unit; write " + text + "ms or " + text
                    + "s (or 500ms, 30s, 5m, 1h, PT1M)");
        }
        if (duration.isNegative() || duration.isZero() && !zeroAllowed) {
            throw new IllegalArgumentException("is " + text + "; it must be " + (zeroAllowed ? "zero or more" : "longer than zero"));
        }
        if (!duration.isZero() && duration.compareTo(SHORTEST) < 0) {
            // read in milliseconds it is 0: no statement timeout at all, a poll that never sleeps
            throw new IllegalArgumentException("is " + text + "; it must be at least 1ms" + (zeroAllowed ? ", or 0" : ""));
        }
        if (duration.compareTo(longest) > 0) {
            throw new IllegalArgumentException("is " + text + "; it must be at most " + words(longest));
        }
        return duration;
    }

    /** A whole number from {@code min} to {@code max}. */
    public static long number(String value, long min, long max) {
        String text = value == null ? "" : value.strip();
        long n;
        try {
            n = Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("is '" + text + "', not a whole number");
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException("is " + n + "; it must be "
                    + (max == Long.MAX_VALUE ? "at least " + min : "between " + min + " and " + max));
        }
        return n;
    }

    /** {@code true} or {@code false}, in any case; anything else is a mistake, not false. */
    public static boolean flag(String value) {
        String text = value == null ? "" : value.strip();
        return switch (text.toLowerCase(Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new IllegalArgumentException("is '" + text + "'; it must be true or false");
        };
    }

    /** The longest durations in the words their messages use: {@code 1h}, {@code 24h}, {@code 7d}. */
    private static String words(Duration longest) {
        return longest.equals(WEEK) ? "7d" : longest.toHours() + "h";
    }

    /** {@code true} or {@code false}; SmallRye's own converter reads {@code enabled} as false. */
    public static final class Flag implements Converter<Boolean> {
        @Override
        public Boolean convert(String value) {
            return flag(value);
        }
    }

    /** Longer than zero, at most an hour. */
    public static final class UpToAnHour implements Converter<Duration> {
        @Override
        public Duration convert(String value) {
            return duration(value, false, HOUR);
        }
    }

    /** Zero or more, at most an hour. */
    public static final class ZeroToAnHour implements Converter<Duration> {
        @Override
        public Duration convert(String value) {
            return duration(value, true, HOUR);
        }
    }

    /** Longer than zero, at most a day. */
    public static final class UpToADay implements Converter<Duration> {
        @Override
        public Duration convert(String value) {
            return duration(value, false, DAY);
        }
    }

    /** Longer than zero, at most a week. */
    public static final class UpToAWeek implements Converter<Duration> {
        @Override
        public Duration convert(String value) {
            return duration(value, false, WEEK);
        }
    }

    /** Requests under way at once per subscription: 1 to 64. */
    public static final class Concurrency implements Converter<Integer> {
        @Override
        public Integer convert(String value) {
            return (int) number(value, 1, 64);
        }
    }

    /** A count of bytes, zero or more. */
    public static final class Bytes implements Converter<Long> {
        @Override
        public Long convert(String value) {
            return number(value, 0, Long.MAX_VALUE);
        }
    }

    /** Events the hand-off holds: 1 to 10,000,000. */
    public static final class HandoffEvents implements Converter<Integer> {
        @Override
        public Integer convert(String value) {
            return (int) number(value, 1, 10_000_000);
        }
    }

    /** Bytes the hand-off or delivery holds: at least 1 MiB, so that one large row always fits. */
    public static final class AtLeastAMebibyte implements Converter<Long> {
        @Override
        public Long convert(String value) {
            return number(value, 1L << 20, Long.MAX_VALUE);
        }
    }
}
