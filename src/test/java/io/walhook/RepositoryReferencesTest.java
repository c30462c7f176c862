package io.walhook;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

/**
 * The repository stands on its own: no file in it (code, tests, README, docs/, deploy/, scripts)
 * points at the team's notes outside it. What a reader needs is in {@code docs/}, and that is what
 * comments and docs cite. The names looked for are spelled in pieces here, so that this file does
 * not match itself.
 */
class RepositoryReferencesTest {

    /** A path out of the repository to the team's notes, and the notes' file names. */
    static final List<String> OUTSIDE_REFERENCES = List.of(
            ".." + "/shared",
            "CONTRACT" + ".md",
            "PGOUTPUT" + ".md",
            "DESIGN" + ".md");

    @Test
    void noFileReferencesNotesOutsideTheRepository() throws IOException, InterruptedException {
        List<Path> files = repositoryFiles();
        assertThat(files).as("files of the repository").isNotEmpty().contains(Path.of("README.md"));
        List<String> offenders = new ArrayList<>();
        for (Path file : files) {
            if (!Files.isRegularFile(file)) {
                continue; // listed by git but deleted in the work tree
            }
            String text = new String(Files.readAllBytes(file), StandardCharsets.ISO_8859_1);
            String[] lines = text.split("\n", -1);
            for (int i = 0; i < lines.length; i++) {
                for (String reference : OUTSIDE_REFERENCES) {
                    if (lines[i].contains(reference)) {
                        offenders.add(file + ":" + (i + 1) + " references " + reference
                                + " (cite the repository's own docs/ instead)");
                    }
                }
            }
        }
        assertThat(offenders).as("references to notes outside the repository").isEmpty();
    }

    /**
     * The files git tracks, and those it would (new, not ignored); without git (a source archive),
     * every file under the working directory but {@code target/} and {@code .git/}.
     */
    static List<Path> repositoryFiles() throws IOException, InterruptedException {
        List<Path> listed = gitFiles();
        if (listed != null) {
            return listed;
        }
        try (Stream<Path> walk = Files.walk(Path.of("."))) {
            return walk.filter(Files::isRegularFile)
                    .map(p -> Path.of(".").relativize(p))
                    .filter(p -> !p.startsWith("target") && !p.startsWith(".git"))
                    .toList();
        }
    }

    private static List<Path> gitFiles() throws InterruptedException {
        Process git;
        try {
            git = new ProcessBuilder("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
                    .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        } catch (IOException noGit) {
            return null;
        }
        byte[] output;
        try (InputStream in = git.getInputStream()) {
            output = in.readAllBytes();
        } catch (IOException e) {
            git.destroy();
            return null;
        }
        if (!git.waitFor(30, TimeUnit.SECONDS) || git.exitValue() != 0) {
            git.destroy();
            return null; // not a git work tree
        }
        List<Path> files = new ArrayList<>();
        for (String name : new String(output, StandardCharsets.UTF_8).split("\0")) {
            if (!name.isEmpty()) {
                files.add(Path.of(name));
            }
        }
        return files;
    }
}
