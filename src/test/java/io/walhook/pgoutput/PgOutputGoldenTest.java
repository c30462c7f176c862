package io.walhook.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The conformance checks ({@link PgOutputScenarioChecks}) on the golden fixtures in
 * {@code src/test/resources/pgoutput/golden}: bytes captured from PostgreSQL 14 to 18 by
 * {@link GoldenFixtureCapture}, checked without a server. Transaction ids and OIDs are compared
 * with the facts recorded in each fixture's header, LSNs only with each other.
 */
class PgOutputGoldenTest extends PgOutputScenarioChecks {

    static final String DIRECTORY = "/pgoutput/golden/";

    private final Map<String, PgOutputCapture> loaded = new ConcurrentHashMap<>();

    @Override
    protected List<PgOutputCapture> captures(PgOutputScenario scenario, int major) {
        List<PgOutputCapture> captures = new ArrayList<>();
        for (int protocol = 1; protocol <= PgOutputScenario.maxProtocol(major); protocol++) {
            String name = PgOutputCapture.fixtureName(major, protocol, scenario.id());
            if (PgOutputGoldenTest.class.getResource(DIRECTORY + name) != null) {
                captures.add(loaded.computeIfAbsent(name, PgOutputGoldenTest::load));
            }
        }
        return captures;
    }

    /**
     * Scenarios whose bytes depend on the protocol version have one fixture per version; the
     * others (byte-identical at every version, which the live suite checks) keep the highest only.
     */
    @Test
    void everyScenarioHasItsFixturesAndNoOthers() {
        TreeSet<String> expected = new TreeSet<>();
        for (int major : PgOutputLiveCaptures.MAJORS) {
            for (PgOutputScenario scenario : PgOutputScenario.values()) {
                int max = PgOutputScenario.maxProtocol(major);
                for (int protocol = scenario.protocolSensitive() ? 1 : max; protocol <= max; protocol++) {
                    expected.add(PgOutputCapture.fixtureName(major, protocol, scenario.id()));
                }
            }
        }
        assertThat(fixtureFiles()).isEqualTo(expected);
    }

    @Test
    void everyFixtureNamesItsServerScenarioAndOptions() {
        for (String name : fixtureFiles()) {
            PgOutputCapture capture = load(name);
            assertThat(capture.fixtureName()).isEqualTo(name);
            assertThat(capture.serverVersion()).startsWith(capture.major() + ".");
            assertThat(capture.options()).containsEntry("publication_names",
                    PgOutputScenario.byId(capture.scenario()).publications());
            assertThat(capture.options()).isEqualTo(PgOutputScenario.byId(capture.scenario())
                    .options(capture.major(), capture.protocol()));
            // the round trip through the file format is exact
            assertThat(PgOutputCapture.fromFixture(name, capture.toFixture()).toFixture()).isEqualTo(capture.toFixture());
        }
    }

    static TreeSet<String> fixtureFiles() {
        URL url = PgOutputGoldenTest.class.getResource(DIRECTORY);
        assertThat(url).as("fixture directory %s on the test classpath", DIRECTORY).isNotNull();
        try (Stream<Path> files = Files.list(Path.of(url.toURI()))) {
            return files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".hex"))
                    .collect(Collectors.toCollection(TreeSet::new));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    static PgOutputCapture load(String name) {
        try (InputStream in = PgOutputGoldenTest.class.getResourceAsStream(DIRECTORY + name)) {
            assertThat(in).as("fixture %s", name).isNotNull();
            return PgOutputCapture.fromFixture(name, new String(in.readAllBytes(), StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
