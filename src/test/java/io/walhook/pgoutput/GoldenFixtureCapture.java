package io.walhook.pgoutput;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * Regenerates the golden fixtures of {@link PgOutputGoldenTest} from live servers:
 * {@code mvn test -Dtest=GoldenFixtureCapture -Dpgoutput.capture=true}. Skipped otherwise (and not
 * matched by surefire's default includes). Run {@link PgOutputConformanceTest} first: this only checks
 * the protocol invariants before it replaces the files.
 */
class GoldenFixtureCapture {

    static final Path TARGET = Path.of("src", "test", "resources", "pgoutput", "golden");

    @Test
    void captureGoldenFixtures() throws IOException {
        assumeTrue(Boolean.getBoolean("pgoutput.capture"), "run with -Dpgoutput.capture=true to regenerate");
        PgOutputConformanceTest checks = new PgOutputConformanceTest();
        for (int major : PgOutputLiveCaptures.MAJORS) {
            for (PgOutputScenario scenario : PgOutputScenario.values()) {
                checks.forEachCapture(scenario, major, PgOutputScenarioChecks::assertProtocolInvariants);
            }
        }
        Files.createDirectories(TARGET);
        try (DirectoryStream<Path> old = Files.newDirectoryStream(TARGET, "*.hex")) {
            for (Path file : old) {
                Files.delete(file);
            }
        }
        for (int major : PgOutputLiveCaptures.MAJORS) {
            for (PgOutputScenario scenario : PgOutputScenario.values()) {
                for (PgOutputCapture capture : PgOutputLiveCaptures.of(major).captures(scenario)) {
                    if (!scenario.protocolSensitive() && capture.protocol() != PgOutputScenario.maxProtocol(major)) {
                        continue;
                    }
                    Files.writeString(TARGET.resolve(capture.fixtureName()), capture.toFixture(), StandardCharsets.UTF_8);
                }
            }
        }
    }
}
