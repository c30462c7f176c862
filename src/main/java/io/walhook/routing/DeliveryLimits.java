package io.walhook.routing;

import java.time.Duration;
import java.util.Optional;

/**
 * How hard one subscription's destination may be driven, for a receiver that cannot take what the
 * global settings allow (a tenant's small endpoint, a serverless function with a concurrency cap).
 * Both are optional; retries count like first attempts.
 *
 * @param maxInFlight requests (AMQP: messages) under way at once, 1 to {@link #MAX_IN_FLIGHT_WEBHOOK}
 *     for a webhook and 1 to {@link #MAX_IN_FLIGHT_AMQP} for AMQP; absent: WALHOOK_DELIVERY_CONCURRENCY
 *     for a webhook, {@value #MAX_IN_FLIGHT_AMQP} for AMQP
 * @param rate at most this many requests started per period, evenly spaced; absent: no limit
 */
public record DeliveryLimits(Optional<Integer> maxInFlight, Optional<Rate> rate) {

    /** Neither limit: the global concurrency, no rate limit. */
    public static final DeliveryLimits NONE = new DeliveryLimits(Optional.empty(), Optional.empty());
    public static final int MAX_IN_FLIGHT_WEBHOOK = 64;
    public static final int MAX_IN_FLIGHT_AMQP = 100;
    public static final int MAX_REQUESTS_PER_PERIOD = 100_000;

    public DeliveryLimits {
        maxInFlight = maxInFlight == null ? Optional.empty() : maxInFlight;
        rate = rate == null ? Optional.empty() : rate;
    }

    /** The highest max_in_flight this destination's kind allows. */
    public static int maxInFlightFor(Destination destination) {
        return destination instanceof Destination.Amqp ? MAX_IN_FLIGHT_AMQP : MAX_IN_FLIGHT_WEBHOOK;
    }

    /** What a max_in_flight out of range is told: the bound depends on the destination's kind. */
    public static String maxInFlightBounds(Destination destination) {
        return destination instanceof Destination.Amqp ? "1 to " + MAX_IN_FLIGHT_AMQP + " for an AMQP destination"
                : "1 to " + MAX_IN_FLIGHT_WEBHOOK + " for a webhook (" + MAX_IN_FLIGHT_AMQP + " for AMQP)";
    }

    /**
     * {@code requests} per {@code period}: a request starts no sooner than {@code period / requests}
     * after the one before, so no window of one period sees more than that many start.
     */
    public record Rate(int requests, Period period) {

        public Rate {
            if (requests < 1 || requests > MAX_REQUESTS_PER_PERIOD) {
                throw new IllegalArgumentException("requests must be from 1 to " + MAX_REQUESTS_PER_PERIOD);
            }
        }

        /**
         * The least time between two request starts, rounded up: at most {@code requests} starts fit
         * in any one period, never {@code requests + 1}.
         */
        public long spacingNanos() {
            long length = period.length.toNanos();
            return (length + requests - 1) / requests;
        }

        /** {@code 50/s} or {@code 600/min}: how the environment writes it. */
        @Override
        public String toString() {
            return requests + "/" + period.shortName;
        }

        /**
         * Reads {@code <requests>/s}, {@code <requests>/min} or a bare {@code <requests>} (per
         * second); the message of the exception says what is wrong.
         */
        public static Rate parse(String text) {
            String value = text.strip();
            Period period = Period.SECOND;
            int slash = value.indexOf('/');
            if (slash >= 0) {
                String unit = value.substring(slash + 1).strip();
                period = Period.parse(unit).orElseThrow(() -> new IllegalArgumentException("has '" + unit
                        + "' as its period; use s (per second) or min (per minute), as in 50/s or 600/min"));
                value = value.substring(0, slash).strip();
            }
            long requests;
            if (!value.matches("-?[0-9]{1,18}")) {
                throw new IllegalArgumentException("is not a rate: write requests per period, as in 50/s or 600/min");
            }
            requests = Long.parseLong(value);
            if (requests < 1 || requests > MAX_REQUESTS_PER_PERIOD) {
                throw new IllegalArgumentException("allows " + requests + " requests per " + period.wireName
                        + "; use 1 to " + MAX_REQUESTS_PER_PERIOD);
            }
            return new Rate((int) requests, period);
        }
    }

    /** The period a rate counts over. */
    public enum Period {
        SECOND("second", "s", Duration.ofSeconds(1)),
        MINUTE("minute", "min", Duration.ofMinutes(1));

        private final String wireName;
        private final String shortName;
        private final Duration length;

        Period(String wireName, String shortName, Duration length) {
            this.wireName = wireName;
            this.shortName = shortName;
            this.length = length;
        }

        /** {@code second} or {@code minute}, as the API writes it. */
        public String wireName() {
            return wireName;
        }

        /** The API's {@code second}/{@code minute} or the environment's {@code s}/{@code min}. */
        public static Optional<Period> parse(String text) {
            for (Period p : values()) {
                if (p.wireName.equals(text) || p.shortName.equals(text)) {
                    return Optional.of(p);
                }
            }
            return Optional.empty();
        }
    }
}
