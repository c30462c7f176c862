package io.walhook.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

import org.junit.jupiter.api.Test;

/**
 * A server the tests restart on the same port comes back even when its port is not free at once:
 * a torture seed in CI lost its AMQP peer for the rest of the run that way (the restart listened
 * once, right after Vert.x said the old listener was closed), and every message to it counted as
 * lost.
 */
class RestartablePortsTest {

    @Test
    void restartableServersListenBelowTheEphemeralRange() {
        int port = Ports.restartable();
        assertThat(port).isBetween(Ports.LOWEST, Ports.ephemeralLow() - 1);
        assertThat(Ports.isFree(port)).isTrue();
        try (AmqpPeer peer = AmqpPeer.start()) {
            assertThat(peer.port()).isLessThan(Ports.ephemeralLow());
        }
    }

    @Test
    void theAmqpPeerListensAgainOnceItsPortIsReleased() throws Exception {
        try (AmqpPeer peer = AmqpPeer.start()) {
            peer.stop();
            await().atMost(Duration.ofSeconds(10)).until(() -> Ports.isFree(peer.port()));
            CompletableFuture<Void> resumed;
            try (ServerSocket squatter = new ServerSocket(peer.port(), 1, InetAddress.getLoopbackAddress())) {
                resumed = CompletableFuture.runAsync(peer::resume);
                // while the port is held, the peer keeps trying instead of giving up
                await().during(Duration.ofMillis(700)).atMost(Duration.ofSeconds(5)).until(() -> !resumed.isDone());
            }
            resumed.get(); // throws if it gave up
            try (Socket client = new Socket()) {
                client.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), peer.port()), 2_000);
                assertThat(client.isConnected()).isTrue();
            }
        }
    }
}
