package io.walhook.testing;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import com.sun.security.auth.module.UnixSystem;

/** When the harness cannot start a server, it says exactly why. */
class HarnessFailureTest {

    @Test
    void namesTheMissingBinary(@TempDir Path empty) {
        assertThatThrownBy(() -> EmbeddedPostgres.builder().binDir(empty).start())
                .isInstanceOf(HarnessException.class)
                .hasMessageContaining(empty.toString())
                .hasMessageContaining("initdb is missing");
    }

    @Test
    void namesAMajorVersionWithoutBinaries() {
        assertThatThrownBy(() -> PostgresBinaries.locate(9))
                .isInstanceOf(HarnessException.class)
                .hasMessageContaining("no PostgreSQL 9 binaries")
                .hasMessageContaining("/usr/lib/postgresql/9/bin");
    }

    @Test
    void namesThePortInUse() throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            int port = taken.getLocalPort();
            assertThatThrownBy(() -> EmbeddedPostgres.builder().port(port).start())
                    .isInstanceOf(HarnessException.class)
                    .hasMessageContaining("port " + port + " on 127.0.0.1 is already in use");
        }
    }

    @Test
    void namesTheDirectoryTheServerUserCannotEnter(@TempDir Path parent) throws Exception {
        Assumptions.assumeTrue(new UnixSystem().getUid() == 0,
                "only as root does the server run as another user (nobody)");
        Path closed = Files.createDirectory(parent.resolve("closed"));
        Files.setPosixFilePermissions(closed, PosixFilePermissions.fromString("rwx------"));
        assertThatThrownBy(() -> EmbeddedPostgres.builder().parentDir(closed).start())
                .isInstanceOf(HarnessException.class)
                .hasMessageContaining("permission")
                .hasMessageContaining(closed.toString());
    }
}
