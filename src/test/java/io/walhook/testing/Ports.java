package io.walhook.testing;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Free ports on 127.0.0.1 for the servers the tests start.
 *
 * <p>A server that goes down and comes back on the same port (PostgreSQL's restart, the AMQP
 * peer's, Artemis's) takes its port from below the kernel's ephemeral range: while it is down, a
 * client's outgoing connection can be given that very port as its local one (another process's, or
 * walhook's own reconnect, which then connects to itself), and the server could not listen again.
 * A port the kernel never hands out for outgoing connections cannot be taken that way.
 */
public final class Ports {

    /** The lowest port the harness picks for a restartable server. */
    static final int LOWEST = 20_000;

    private Ports() {
    }

    /** A port nothing listens on now, chosen by the kernel (in its ephemeral range). */
    public static int free() {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new HarnessException("cannot find a free port on 127.0.0.1: " + e, e);
        }
    }

    /** A free port below the ephemeral range, for a server that restarts on the same port. */
    public static int restartable() {
        int below = ephemeralLow();
        if (below - LOWEST < 1_000) {
            return free(); // an unusual range: nothing to keep clear of
        }
        ThreadLocalRandom random = ThreadLocalRandom.current();
        for (int attempt = 0; attempt < 200; attempt++) {
            int candidate = random.nextInt(LOWEST, below);
            if (isFree(candidate)) {
                return candidate;
            }
        }
        throw new HarnessException("no free port on 127.0.0.1 between " + LOWEST + " and " + below + " in 200 tries");
    }

    /** True if a server could listen on this port of 127.0.0.1 now. */
    public static boolean isFree(int port) {
        try (ServerSocket socket = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** The first port of {@code net.ipv4.ip_local_port_range} (32768 where it cannot be read). */
    static int ephemeralLow() {
        try {
            // read line-wise: Files.readString trusts the size procfs reports and can return one byte
            String range = Files.readAllLines(Path.of("/proc/sys/net/ipv4/ip_local_port_range")).get(0).strip();
            return Integer.parseInt(range.split("\\s+")[0]);
        } catch (IOException | RuntimeException e) {
            return 32_768;
        }
    }
}
