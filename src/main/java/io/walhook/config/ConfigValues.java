package io.walhook.config;

import java.time.Duration;
import java.util.Locale;

import io.quarkus.runtime.configuration.DurationConverter;

/**
 * Reads configuration text into values, naming the variable at fault in one line
 * ({@link ConfigException}): walhook maps its settings as text and converts them here, so that a
 * bad value never surfaces as a converter's stack trace naming a property.
 */
public final class ConfigValues {

    private ConfigValues() {
    }

    /**
     * A duration such as {@code 500ms}, {@code 30s}, {@code 5m}, {@code 1h} or {@code PT1M}, longer
     * than zero (or zero, when {@code zeroAllowed}) and at most {@code longest}.
     */
    public static Duration duration(String variable, String value, boolean zeroAllowed, Duration longest,
            String longestText) {
        String text = value == null ? "" : value.strip();
        Duration duration;
        try {
            duration = text.isEmpty() ? null : DurationConverter.parseDuration(text);
        } catch (RuntimeException e) {
            duration = null;
        }
        if (duration == null) {
            throw new ConfigException(variable, "is '" + text + "', not a duration; write e.g. 500ms, 30s, 5m, 1h or PT1M");
        }
        if (duration.isNegative() || duration.isZero() && !zeroAllowed) {
            throw new ConfigException(variable, "is " + text + "; it must be " + (zeroAllowed ? "zero or more" : "longer than zero"));
        }
        if (duration.compareTo(longest) > 0) {
            throw new ConfigException(variable, "is " + text + "; it must be at most " + longestText);
        }
        return duration;
    }

    /** A whole number from {@code min} to {@code max}. */
    public static long number(String variable, String value, long min, long max) {
        String text = value == null ? "" : value.strip();
        long n;
        try {
            n = Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new ConfigException(variable, "is '" + text + "', not a whole number");
        }
        if (n < min || n > max) {
            throw new ConfigException(variable, "is " + n + "; it must be " + (max == Long.MAX_VALUE ? "at least " + min
                    : "between " + min + " and " + max));
        }
        return n;
    }

    /** {@code true} or {@code false}, in any case; anything else is a mistake, not false. */
    public static boolean flag(String variable, String value) {
        String text = value == null ? "" : value.strip();
        return switch (text.toLowerCase(Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new ConfigException(variable, "is '" + text + "'; it must be true or false");
        };
    }
}
