package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The package step, run where walhook's variables are set (a developer's shell, a CI job that
 * also deploys, a Dockerfile's build stage given them), puts none of their credentials in what
 * it makes: the jar and its generated classes, and the AppCDS archive it makes by running the
 * jar. Quarkus records the build's value of every runtime property from any source but the
 * environment and system properties; the datasource settings walhook derives from
 * {@code WALHOOK_SOURCE_URL} were recorded, the database's password with them, in the image.
 */
class BuildCredentialsIT {

    /** Every credential below contains this; nothing walhook or its libraries hold does. */
    private static final String SECRET = "Qx7built";

    @TempDir
    Path copy;

    @Test
    void aBuildWhoseEnvironmentHoldsCredentialsPutsNoneOfThemInWhatItMakes() throws Exception {
        Path project = Path.of("").toAbsolutePath();
        org.junit.jupiter.api.Assumptions.assumeFalse(Boolean.getBoolean("walhook.it.native"),
                "the JVM package step's output is checked; the native build runs on the same configuration");
        for (String part : List.of("pom.xml", "mvnw", ".mvn", "openapi.yaml", "src/main")) {
            copyTree(project.resolve(part), copy.resolve(part));
        }
        Map<String, String> credentials = Map.of(
                "WALHOOK_SOURCE_URL", "postgresql://walhook:url" + SECRET + "@db.example.com:5432/app",
                "WALHOOK_SOURCE_PASSWORD", "password" + SECRET,
                "WALHOOK_API_TOKEN", "token" + SECRET,
                "WALHOOK_AMQP_URL", "amqp://broker:amqp" + SECRET + "@amqp.example.com:5672",
                "WALHOOK_SUBSCRIPTIONS_ORDERS_URL", "https://hooks.example.com/h?token=query" + SECRET,
                "WALHOOK_SUBSCRIPTIONS_ORDERS_SECRET", "whsec_" + java.util.Base64.getEncoder().encodeToString(
                        ("signing" + SECRET).getBytes(StandardCharsets.UTF_8)));
        List<String> command = new ArrayList<>(List.of("./mvnw", "-B", "-o", "-q", "-Dmaven.test.skip=true"));
        String repository = System.getProperty("maven.repo.local", "");
        if (!repository.isBlank()) {
            command.add("-Dmaven.repo.local=" + repository); // the outer build's, where everything is already
        }
        command.add("package");
        ProcessBuilder build = new ProcessBuilder(command)
                .directory(copy.toFile()).redirectErrorStream(true).redirectOutput(copy.resolve("build.log").toFile());
        build.environment().keySet().removeIf(name -> name.startsWith("WALHOOK_") || name.startsWith("QUARKUS_"));
        build.environment().putAll(credentials);
        build.environment().put("JAVA_HOME", System.getProperty("java.home"));
        build.environment().put("MAVEN_OPTS", "-Xmx768m");
        Process process = build.start();
        boolean ended = process.waitFor(8, TimeUnit.MINUTES);
        if (!ended) {
            process.destroyForcibly();
        }
        String log = Files.readString(copy.resolve("build.log"));
        assertThat(ended && process.exitValue() == 0).as("the build ends well:\n" + log).isTrue();
        Path app = copy.resolve("target/quarkus-app");
        assertThat(app.resolve("quarkus-run.jar")).isRegularFile();
        assertThat(app.resolve("app-cds.jsa")).as("the archive made by running the jar").isRegularFile();

        List<String> holding = new ArrayList<>();
        try (Stream<Path> files = Files.walk(app)) {
            for (Path file : files.filter(Files::isRegularFile).toList()) {
                if (file.toString().endsWith(".jar")) {
                    try (ZipInputStream jar = new ZipInputStream(Files.newInputStream(file))) {
                        for (ZipEntry entry; (entry = jar.getNextEntry()) != null; ) {
                            if (holds(jar)) {
                                holding.add(app.relativize(file) + "!" + entry.getName());
                            }
                        }
                    }
                } else {
                    try (InputStream in = Files.newInputStream(file)) {
                        if (holds(in)) {
                            holding.add(app.relativize(file).toString());
                        }
                    }
                }
            }
        }
        assertThat(holding).as("what the build made holding a credential of its environment").isEmpty();
        assertThat(log).doesNotContain(SECRET);
    }

    /** Whether the stream's bytes hold {@link #SECRET} (it is read to its end, not closed). */
    private static boolean holds(InputStream in) throws IOException {
        byte[] needle = SECRET.getBytes(StandardCharsets.US_ASCII);
        byte[] bytes = in.readAllBytes();
        outer:
        for (int i = 0; i <= bytes.length - needle.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (bytes[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return true;
        }
        return false;
    }

    private static void copyTree(Path from, Path to) throws IOException {
        try (Stream<Path> paths = Files.walk(from)) {
            for (Path path : paths.toList()) {
                Path target = to.resolve(from.relativize(path).toString());
                if (Files.isDirectory(path)) {
                    Files.createDirectories(target);
                } else {
                    Files.createDirectories(target.getParent());
                    Files.copy(path, target, java.nio.file.StandardCopyOption.COPY_ATTRIBUTES);
                }
            }
        }
    }
}
