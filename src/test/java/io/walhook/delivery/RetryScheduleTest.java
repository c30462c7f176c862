package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.Random;

import org.junit.jupiter.api.Test;

class RetryScheduleTest {

    private static final Instant NOW = Instant.parse("2026-12-01T12:00:00Z");
    private final Random random = new Random(7);

    private static long millis(Duration d) {
        return d.toMillis();
    }

    @Test
    void backoffDoublesWithFullJitterUpToTheMaximum() {
        for (int attempt = 1; attempt <= 12; attempt++) {
            // a destination failing every attempt: its failures in a row are this request's
            RetrySchedule schedule = new RetrySchedule(Duration.ofSeconds(1), Duration.ofMinutes(5));
            schedule.succeeded(NOW);
            for (int f = 0; f < attempt; f++) {
                schedule.failed(java.util.UUID.randomUUID().toString());
            }
            long bound = Math.min(1000, 200L << (attempt - 1));
            long max = 0;
            for (int i = 0; i < 200; i++) {
                long wait = millis(schedule.delay(attempt, Optional.empty(), NOW, random));
                assertThat(wait).isBetween(RetrySchedule.SHORTEST_MILLIS, bound);
                max = Math.max(max, wait);
            }
            assertThat(max).as("jitter spreads over the whole range").isGreaterThan(bound / 2);
        }
    }

    @Test
    void theLongIntervalAppliesOnlyWhileEveryAttemptFails() {
        RetrySchedule schedule = new RetrySchedule(Duration.ofSeconds(1), Duration.ofMinutes(5));
        schedule.succeeded(NOW);
        for (int i = 0; i < RetrySchedule.STREAK; i++) {
            schedule.failed(java.util.UUID.randomUUID().toString());
        }
        assertThat(schedule.everyAttemptFailing(NOW.plusSeconds(1))).as("a success a second ago").isFalse();
        assertThat(schedule.everyAttemptFailing(NOW.plusSeconds(3))).isTrue();
        schedule.succeeded(NOW);
        for (int i = 1; i < RetrySchedule.STREAK; i++) {
            schedule.failed(java.util.UUID.randomUUID().toString());
        }
        assertThat(schedule.everyAttemptFailing(NOW.plusSeconds(60))).as("one failure short of a streak").isFalse();
        schedule.failed(java.util.UUID.randomUUID().toString());
        assertThat(schedule.everyAttemptFailing(NOW.plusSeconds(60))).isTrue();
        long longest = 0;
        for (int i = 0; i < 200; i++) {
            longest = Math.max(longest, millis(schedule.delay(30, Optional.empty(), NOW.plusSeconds(60), random)));
        }
        assertThat(longest).isGreaterThan(60_000).isLessThanOrEqualTo(300_000);
        // one success and the destination is retried at the short pace again
        assertThat(schedule.succeeded(NOW.plusSeconds(60))).as("the destination is back").isTrue();
        assertThat(schedule.succeeded(NOW.plusSeconds(61))).isFalse();
        for (int i = 0; i < 200; i++) {
            assertThat(millis(schedule.delay(30, Optional.empty(), NOW.plusSeconds(60), random))).isLessThanOrEqualTo(1000);
        }
    }

    @Test
    void oneRequestFailingAgainAndAgainIsNotADestinationThatIsDown() {
        RetrySchedule schedule = new RetrySchedule(Duration.ofSeconds(60), Duration.ofSeconds(5));
        String refused = "0000000000000001-0001";
        String other = "0000000000000002-0001";
        for (int i = 0; i < 3 * RetrySchedule.STREAK; i++) {
            schedule.failed(i % 2 == 0 ? refused : other);
        }
        Instant later = NOW.plusSeconds(60);
        assertThat(schedule.everyAttemptFailing(later)).as("two requests refused, each again and again").isFalse();
        for (int i = 0; i < 200; i++) {
            assertThat(millis(schedule.delay(30, Optional.empty(), later, random)))
                    .as("nothing succeeding for a while: the probe interval bounds each one's backoff").isLessThanOrEqualTo(5_000);
        }
        schedule.failed(java.util.UUID.randomUUID().toString());
        assertThat(schedule.everyAttemptFailing(later)).as("a third request failing too").isTrue();
        schedule.succeeded(later);
        for (int i = 0; i < RetrySchedule.STREAK; i++) {
            schedule.failed(refused);
        }
        schedule.failed(other);
        assertThat(schedule.everyAttemptFailing(later.plusSeconds(60)))
                .as("the requests that failed before the success are forgotten with it").isFalse();
        schedule.reset();
        for (int i = 0; i < RetrySchedule.STREAK; i++) {
            schedule.failed(List.of(refused, other, "0000000000000003-0001").get(i % 3));
        }
        assertThat(schedule.everyAttemptFailing(later.plusSeconds(60))).isTrue();
        schedule.reset();
        assertThat(schedule.everyAttemptFailing(later.plusSeconds(60))).as("an operator's replay forgets them").isFalse();
    }

    @Test
    void aDestinationDownForHoursIsProbedWithinTheProbeIntervalWhateverTheMaximumBackoff() {
        // 60 s of backoff while some requests succeed (the default), probes at most 5 s apart while none do
        RetrySchedule schedule = new RetrySchedule(Duration.ofSeconds(60), Duration.ofSeconds(5));
        schedule.succeeded(NOW);
        Instant at = NOW;
        long longest = 0;
        for (int attempt = 1; at.isBefore(NOW.plus(Duration.ofHours(3))); attempt++) {
            schedule.failed(java.util.UUID.randomUUID().toString());
            Duration wait = schedule.delay(attempt, Optional.empty(), at, random);
            if (at.isAfter(NOW.plusSeconds(10))) {
                longest = Math.max(longest, millis(wait));
            }
            at = at.plus(wait);
        }
        assertThat(longest).as("so it gets its backlog within seconds of coming back, from a minute or hours down")
                .isGreaterThan(2_500).isLessThanOrEqualTo(5_000);
    }

    @Test
    void aRetryAfterOfMinutesIsHonouredThoughProbesAreSecondsApart() {
        RetrySchedule schedule = new RetrySchedule(Duration.ofSeconds(60), Duration.ofSeconds(5));
        schedule.succeeded(NOW);
        for (int i = 0; i < 20; i++) {
            schedule.failed(java.util.UUID.randomUUID().toString());
        }
        Instant later = NOW.plusSeconds(60);
        assertThat(schedule.everyAttemptFailing(later)).isTrue();
        assertThat(schedule.delay(20, Optional.of(Duration.ofSeconds(120)), later, random)).isEqualTo(Duration.ofSeconds(120));
        assertThat(schedule.delay(20, Optional.of(Duration.ofHours(2)), later, random))
                .as("within reason").isEqualTo(RetrySchedule.RETRY_AFTER_LIMIT);
    }

    @Test
    void aSuccessResetsTheBackoffSoARequestFailingBesideSuccessesIsRetriedQuicklyThenOnItsOwnPace() {
        RetrySchedule schedule = new RetrySchedule(Duration.ofSeconds(60), Duration.ofMinutes(5));
        schedule.succeeded(NOW);
        for (int f = 0; f < 5; f++) {
            schedule.failed(java.util.UUID.randomUUID().toString());
        }
        assertThat(millis(schedule.delay(5, Optional.empty(), NOW, random))).as("five failures in a row").isGreaterThan(0);
        long longest = 0;
        for (int i = 0; i < 200; i++) {
            longest = Math.max(longest, millis(schedule.delay(5, Optional.empty(), NOW, random)));
        }
        assertThat(longest).isGreaterThan(1600).isLessThanOrEqualTo(3200);
        // other requests succeed: the next failure of this one waits at the short pace again
        schedule.succeeded(NOW);
        schedule.failed(java.util.UUID.randomUUID().toString());
        for (int attempt = 1; attempt <= 1 + RetrySchedule.QUICK_RETRIES; attempt++) {
            for (int i = 0; i < 200; i++) {
                assertThat(millis(schedule.delay(attempt, Optional.empty(), NOW, random)))
                        .as("attempt %d after a success elsewhere", attempt).isLessThanOrEqualTo(200);
            }
        }
        // an event the destination always refuses, while it takes the others: its own backoff grows
        int attempts = 1 + RetrySchedule.QUICK_RETRIES + 4;
        longest = 0;
        for (int i = 0; i < 200; i++) {
            longest = Math.max(longest, millis(schedule.delay(attempts, Optional.empty(), NOW, random)));
        }
        assertThat(longest).isGreaterThan(1600).isLessThanOrEqualTo(3200);
        assertThat(millis(schedule.delay(1000, Optional.empty(), NOW, random))).isLessThanOrEqualTo(60_000);
    }

    @Test
    void retryAfterIsHonouredAndBoundedWhateverItsSize() {
        RetrySchedule schedule = new RetrySchedule(Duration.ofSeconds(1), Duration.ofMinutes(5));
        assertThat(schedule.delay(1, Optional.of(Duration.ofSeconds(3)), NOW, random)).isEqualTo(Duration.ofSeconds(3));
        // a floor, not a replacement: the backoff of a request failing for long still grows past it
        assertThat(schedule.delay(1, Optional.of(Duration.ZERO), NOW, random)).isBetween(Duration.ofMillis(50),
                Duration.ofMillis(200));
        for (int i = 0; i < 50; i++) {
            assertThat(schedule.delay(4, Optional.of(Duration.ofMillis(100)), NOW, random))
                    .isBetween(Duration.ofMillis(100), Duration.ofMillis(1000));
        }
        assertThat(schedule.delay(1, Optional.of(Duration.ofDays(3)), NOW, random)).isEqualTo(Duration.ofMinutes(5));
        // too large to count in milliseconds: bounded, not an ArithmeticException
        assertThat(schedule.delay(1, Optional.of(Duration.ofSeconds(Long.MAX_VALUE)), NOW, random))
                .isEqualTo(Duration.ofMinutes(5));
    }

    @Test
    void hugeAttemptCountsAndSettingsDoNotOverflow() {
        RetrySchedule schedule = new RetrySchedule(Duration.ofSeconds(Long.MAX_VALUE), Duration.ofSeconds(Long.MAX_VALUE));
        assertThat(schedule.delay(Integer.MAX_VALUE, Optional.empty(), NOW, random).isNegative()).isFalse();
        assertThat(RetrySchedule.saturatedMillis(Duration.ofSeconds(Long.MAX_VALUE))).isEqualTo(Long.MAX_VALUE);
    }
}
