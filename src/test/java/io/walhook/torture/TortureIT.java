package io.walhook.torture;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Arrays;
import java.util.stream.Stream;

import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The fault-injection tier, bounded for CI: a few seeds of {@link TortureRun} against the packaged
 * jar. {@code -Dtorture.seeds=4,5,6} and {@code -Dtorture.seconds=120} choose others; long runs go
 * through {@code ./scripts/torture}.
 */
class TortureIT {

    @TestFactory
    Stream<DynamicTest> everyInvariantHoldsUnderSeededFaults() {
        long seconds = Long.getLong("torture.seconds", 45);
        return Arrays.stream(System.getProperty("torture.seeds", "1,2,3").split(",")).map(String::strip)
                .map(Long::parseLong)
                .map(seed -> DynamicTest.dynamicTest("seed " + seed, () -> {
                    TortureRun.Report report = TortureRun.run(seed, Duration.ofSeconds(seconds), System.out);
                    assertThat(report.violations()).as(report.summary()).isEmpty();
                    assertThat(report.changes()).as("committed changes").isGreaterThan(1000);
                    for (String subscription : java.util.List.of("hooks", "single", "queue")) {
                        assertThat(report.deliveries().getOrDefault(subscription, 0)).as(subscription).isGreaterThan(100);
                    }
                }));
    }
}
