package io.walhook.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Random;

import org.junit.jupiter.api.Test;

/**
 * The replication socket's reading: every byte once and in order, whatever sizes the socket
 * returns, end of stream passed on; the factory makes unconnected sockets that connect and talk.
 * (Every replication test streams through it as well.)
 */
class CoalescingSocketFactoryTest {

    /** A stream that returns at most {@code most} bytes per read, like a socket with little in it. */
    private static InputStream trickling(byte[] data, int most) {
        return new ByteArrayInputStream(data) {
            @Override
            public synchronized int read(byte[] b, int off, int len) {
                return super.read(b, off, Math.min(len, most));
            }
        };
    }

    @Test
    void everyByteComesThroughOnceAndInOrderWhateverTheReadSizes() throws IOException {
        for (int most : new int[] {1, 100, 5000, 70_000}) {
            // a short read makes the next wait a millisecond: a few hundred of them
            byte[] data = new byte[Math.min(300_000, most * 300)];
            new Random(most).nextBytes(data);
            InputStream in = new CoalescingSocketFactory.CoalescingInputStream(trickling(data, most));
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] piece = new byte[8192];
            int n;
            int reads = 0;
            while ((n = in.read(piece, 0, reads++ % 3 == 0 ? 1 : piece.length)) != -1) {
                out.write(piece, 0, n);
                if (reads % 5 == 0) {
                    int single = in.read();
                    if (single == -1) {
                        break;
                    }
                    out.write(single);
                }
            }
            assertThat(out.toByteArray()).as("reads of at most %d bytes", most).isEqualTo(data);
            assertThat(in.read()).isEqualTo(-1);
        }
    }

    @Test
    void aBacklogIsReadInPiecesOfUpTo64KiBWhateverSizeTheReaderAsksFor() throws IOException {
        byte[] data = new byte[640 * 1024];
        int[] socketReads = {0};
        InputStream socket = new ByteArrayInputStream(data) {
            @Override
            public synchronized int read(byte[] b, int off, int len) {
                socketReads[0]++;
                return super.read(b, off, len);
            }
        };
        InputStream in = new CoalescingSocketFactory.CoalescingInputStream(socket);
        byte[] piece = new byte[8192]; // pgjdbc's buffer
        long total = 0;
        int n;
        while ((n = in.read(piece, 0, piece.length)) != -1) {
            total += n;
        }
        assertThat(total).isEqualTo(data.length);
        assertThat(socketReads[0]).as("10 full reads and the one that finds the end").isEqualTo(11);
    }

    @Test
    void availableCountsWhatIsBufferedBeforeAskingTheSocket() throws IOException {
        InputStream in = new CoalescingSocketFactory.CoalescingInputStream(new ByteArrayInputStream(new byte[] {1, 2, 3}));
        assertThat(in.read()).isEqualTo(1);
        assertThat(in.available()).isEqualTo(2);
        assertThat(in.skip(1)).isEqualTo(1);
        assertThat(in.read(new byte[0], 0, 0)).isZero();
        assertThat(in.read()).isEqualTo(3);
        assertThat(in.available()).isZero();
    }

    @Test
    void makesUnconnectedSocketsThatConnectAndReadThroughTheBuffer() throws Exception {
        CoalescingSocketFactory factory = new CoalescingSocketFactory();
        assertThatThrownBy(() -> factory.createSocket("127.0.0.1", 5432)).isInstanceOf(IOException.class)
                .hasMessageContaining("unconnected");
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                Socket socket = factory.createSocket()) {
            socket.connect(server.getLocalSocketAddress(), 5000);
            try (Socket accepted = server.accept()) {
                accepted.getOutputStream().write("hello".getBytes());
                accepted.shutdownOutput();
                assertThat(socket.getInputStream().readAllBytes()).isEqualTo("hello".getBytes());
                assertThat(socket.getInputStream()).isSameAs(socket.getInputStream());
            }
        }
    }

    @Test
    void waitingForDataTimesOutQuietlyThenKeepsWhatArrivesForTheNextRead() throws IOException {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CoalescingSocketFactory factory = new CoalescingSocketFactory();
            Socket client = factory.createSocket();
            assertThat(CoalescingSocketFactory.takeCreated()).isSameAs(client);
            assertThat(CoalescingSocketFactory.takeCreated()).as("taken once").isNull();
            client.connect(server.getLocalSocketAddress());
            try (client; Socket peer = server.accept()) {
                CoalescingSocketFactory.CoalescingSocket socket = (CoalescingSocketFactory.CoalescingSocket) client;
                client.setSoTimeout(0);
                assertThat(socket.awaitData(50)).as("nothing sent").isFalse();
                assertThat(client.getSoTimeout()).as("the connection's own timeout is back").isZero();
                peer.getOutputStream().write(new byte[] {1, 2, 3});
                assertThat(socket.awaitData(60_000)).isTrue();
                assertThat(socket.buffered()).isEqualTo(3);
                assertThat(client.getInputStream().available()).as("what pgjdbc asks before reading").isEqualTo(3);
                byte[] read = new byte[8];
                assertThat(client.getInputStream().read(read)).isEqualTo(3);
                assertThat(read).startsWith((byte) 1, (byte) 2, (byte) 3);
                CoalescingSocketFactory.CoalescingInputStream input =
                        (CoalescingSocketFactory.CoalescingInputStream) client.getInputStream();
                assertThat(input.waitsBeforeNextRead()).as("after a short read, the next waits for more").isTrue();
                assertThat(socket.awaitData(1)).as("the stream is still usable after a timeout").isFalse();
                // nothing came for the whole wait: the next read does not wait a millisecond first (an idle
                // reader woke for it every second)
                assertThat(input.waitsBeforeNextRead()).isFalse();
                peer.shutdownOutput();
                // closed by the server: said, not left to pgjdbc's non-blocking read (which only says "nothing")
                assertThatThrownBy(() -> socket.awaitData(60_000)).isInstanceOf(java.io.EOFException.class);
            }
        }
    }

    @Test
    void pgjdbcsCheckForAPendingMessageFindingNothingIsAnsweredWithoutWaitingOnTheSocket() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            Socket client = new CoalescingSocketFactory().createSocket();
            CoalescingSocketFactory.takeCreated();
            client.connect(server.getLocalSocketAddress());
            try (client; Socket peer = server.accept()) {
                CoalescingSocketFactory.CoalescingInputStream input =
                        (CoalescingSocketFactory.CoalescingInputStream) client.getInputStream();
                byte[] read = new byte[8];
                // pgjdbc's check: a read with a 1 ms timeout, a timeout meaning "nothing pending"
                client.setSoTimeout(CoalescingSocketFactory.PEEK_TIMEOUT_MILLIS);
                assertThatThrownBy(() -> input.read(read)).isInstanceOf(java.net.SocketTimeoutException.class);
                assertThat(input.peeksAnswered()).as("answered without a wait on the socket").isEqualTo(1);
                // any other timeout is the socket's own wait
                client.setSoTimeout(20);
                assertThatThrownBy(() -> input.read(read)).isInstanceOf(java.net.SocketTimeoutException.class);
                assertThat(input.peeksAnswered()).isEqualTo(1);
                // with bytes on the socket the check reads them
                peer.getOutputStream().write(new byte[] {7, 8});
                org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(30))
                        .until(() -> input.available() == 2);
                client.setSoTimeout(CoalescingSocketFactory.PEEK_TIMEOUT_MILLIS);
                assertThat(input.read(read)).isEqualTo(2);
                assertThat(read).startsWith((byte) 7, (byte) 8);
                assertThat(input.peeksAnswered()).isEqualTo(1);
                // a connection whose own timeout is 1 ms (a status interval of 1 ms) reads it as set: a
                // message's second half is waited for, not answered "nothing" in a spin
                client.setSoTimeout(CoalescingSocketFactory.PEEK_TIMEOUT_MILLIS); // pgjdbc's check, the same value
                assertThatThrownBy(() -> input.read(read)).isInstanceOf(java.net.SocketTimeoutException.class);
                assertThat(input.peeksAnswered()).isEqualTo(1);
            }
        }
    }
}
