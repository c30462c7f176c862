package io.walhook.testing;

import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A real DNS server over UDP for the names a test gives it: A records in the order given, an
 * empty answer for other record types of those names, NXDOMAIN for any other name; or, silent,
 * one that takes every query and answers none (a DNS server that is down behind a firewall).
 */
public final class DnsServer implements AutoCloseable {

    private final DatagramSocket socket;
    private final Map<String, List<InetAddress>> names;
    private final boolean silent;
    private final AtomicInteger queries = new AtomicInteger();

    private DnsServer(DatagramSocket socket, Map<String, List<InetAddress>> names, boolean silent) {
        this.socket = socket;
        this.names = names;
        this.silent = silent;
        Thread thread = new Thread(this::serve, "test-dns-" + socket.getLocalPort());
        thread.setDaemon(true);
        thread.start();
    }

    /** Answers {@code names} (lower case, without the final dot) on 127.0.0.1 and a free port. */
    public static DnsServer answering(Map<String, List<InetAddress>> names) throws IOException {
        return new DnsServer(new DatagramSocket(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)), names, false);
    }

    /** Takes queries on {@code address} and never answers. */
    public static DnsServer silent(InetSocketAddress address) throws IOException {
        return new DnsServer(new DatagramSocket(address), Map.of(), true);
    }

    /** {@code host:port}, as a resolver's server list takes it. */
    public String address() {
        return socket.getLocalAddress().getHostAddress() + ":" + socket.getLocalPort();
    }

    /** The queries it received so far. */
    public int queries() {
        return queries.get();
    }

    @Override
    public void close() {
        socket.close();
    }

    private void serve() {
        byte[] buffer = new byte[1500];
        while (!socket.isClosed()) {
            DatagramPacket packet = new DatagramPacket(buffer, buffer.length);
            try {
                socket.receive(packet);
                queries.incrementAndGet();
                if (!silent) {
                    byte[] answer = answer(ByteBuffer.wrap(packet.getData(), 0, packet.getLength()));
                    socket.send(new DatagramPacket(answer, answer.length, packet.getSocketAddress()));
                }
            } catch (IOException | RuntimeException e) {
                if (socket.isClosed()) {
                    return;
                }
            }
        }
    }

    /** The response to one query: its id and question, then the records of its name and type. */
    private byte[] answer(ByteBuffer query) {
        short id = query.getShort(0);
        int questionStart = 12;
        StringBuilder name = new StringBuilder();
        int at = questionStart;
        for (int length = query.get(at) & 0xff; length != 0; length = query.get(at) & 0xff) {
            if (name.length() > 0) {
                name.append('.');
            }
            for (int i = 1; i <= length; i++) {
                name.append((char) query.get(at + i));
            }
            at += length + 1;
        }
        int type = query.getShort(at + 1) & 0xffff;
        int questionEnd = at + 5; // the root label, type and class
        List<InetAddress> addresses = names.get(name.toString().toLowerCase(java.util.Locale.ROOT));
        List<InetAddress> records = addresses == null || type != 1 ? List.of() : addresses;
        ByteBuffer response = ByteBuffer.allocate(questionEnd + records.size() * 16);
        response.putShort(id);
        response.putShort((short) (addresses == null ? 0x8183 : 0x8180)); // a response, recursion; NXDOMAIN or no error
        response.putShort((short) 1).putShort((short) records.size()).putShort((short) 0).putShort((short) 0);
        for (int i = questionStart; i < questionEnd; i++) {
            response.put(query.get(i));
        }
        for (InetAddress address : records) {
            response.putShort((short) 0xc00c); // the question's name
            response.putShort((short) 1).putShort((short) 1).putInt(60).putShort((short) 4).put(address.getAddress());
        }
        return response.array();
    }
}
