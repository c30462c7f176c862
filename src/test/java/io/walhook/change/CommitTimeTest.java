package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;

import org.junit.jupiter.api.Test;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;

/** Commit times as events spell them: hand-formatted, always what the formatter of the contract spells. */
class CommitTimeTest {

    @Property(tries = 5000)
    void spelledAsTheFormatterSpellsThem(@ForAll @LongRange(min = -62_167_219_200L - 86_400L * 400,
            max = 253_402_300_799L + 86_400L * 400) long seconds, @ForAll @IntRange(min = 0, max = 999_999_999) int nanos) {
        Instant time = Instant.ofEpochSecond(seconds, nanos);
        assertThat(EventJsonWriter.formatTime(time)).isEqualTo(EventJsonWriter.COMMIT_TIME.format(time));
    }

    @Test
    void microsecondsAlwaysWrittenAndNullStaysNull() {
        assertThat(EventJsonWriter.formatTime(Instant.parse("2026-11-29T16:00:00Z"))).isEqualTo("2026-11-29T16:00:00.000000Z");
        assertThat(EventJsonWriter.formatTime(Instant.parse("0001-01-01T00:00:00.000001Z"))).isEqualTo("0001-01-01T00:00:00.000001Z");
        assertThat(EventJsonWriter.formatTime(Instant.parse("9999-12-31T23:59:59.999999999Z")))
                .isEqualTo("9999-12-31T23:59:59.999999Z");
        assertThat(EventJsonWriter.formatTime(null)).isNull();
    }
}
