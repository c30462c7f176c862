package io.walhook.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy on 127.0.0.1 in front of a server, for faults a server does not make itself: every
 * connection through it can be closed at once, cleanly (FIN, no error message), as a load
 * balancer or NAT gateway drops a connection it considers idle; or go silent (a black hole: what
 * either side writes is taken and never passed on), as a network partition does; or lose their
 * server while their clients are never told (half-open), as a failover to a new primary does.
 */
public final class TcpProxy implements AutoCloseable {

    private final ServerSocket listener;
    private final String host;
    private volatile int targetPort;
    private final List<Socket> open = new CopyOnWriteArrayList<>();
    /** The server side of each connection, by its number. */
    private final java.util.Map<Integer, Socket> servers = new java.util.concurrent.ConcurrentHashMap<>();
    private final AtomicInteger accepted = new AtomicInteger();
    /** Connections whose client has not closed (or reset) its side. */
    private final AtomicInteger clientsOpen = new AtomicInteger();
    /** Connections up to this one (in order of acceptance) pass nothing on any more. */
    private volatile int silentUpTo;
    /** Set: the next bytes a server sends are cut after the first, and every server lost ({@link #loseServerMidMessage}). */
    private final java.util.concurrent.atomic.AtomicBoolean cutNext = new java.util.concurrent.atomic.AtomicBoolean();

    private TcpProxy(String host, int targetPort) throws IOException {
        this.host = host;
        this.targetPort = targetPort;
        this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::accept, "tcp-proxy-" + listener.getLocalPort());
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /** A proxy to {@code host:port}, listening on a free port of 127.0.0.1. */
    public static TcpProxy to(String host, int port) {
        try {
            return new TcpProxy(host, port);
        } catch (IOException e) {
            throw new HarnessException("cannot start a TCP proxy to " + host + ":" + port + ": " + e.getMessage(), e);
        }
    }

    public int port() {
        return listener.getLocalPort();
    }

    /** Connections accepted from now on go to {@code port} (of the same host): a failover behind one address. */
    public void retarget(int port) {
        targetPort = port;
    }

    /** Connections accepted so far. */
    public int connections() {
        return accepted.get();
    }

    /** Connections whose client has not closed or reset its side yet. */
    public int clientsOpen() {
        return clientsOpen.get();
    }

    /** Closes every connection through the proxy, both sides, without a word: new ones are accepted as before. */
    public void dropAll() {
        for (Socket socket : open) {
            closeQuietly(socket);
        }
        open.clear();
    }

    /**
     * The connections open now pass nothing on from now on, either way, not even their end (one side
     * closing leaves the other open); new ones work.
     */
    public synchronized void silenceAll() {
        silentUpTo = accepted.get();
    }

    /**
     * The server behind every connection open now goes away: its side is closed (its backends end,
     * their locks and slots are freed), while the clients' sides stay open and hear nothing, not even
     * the end, as after a failover that left them half-open. New connections reach the server.
     */
    public synchronized void loseServerOfAll() {
        silenceAll();
        int upTo = silentUpTo;
        servers.forEach((connection, server) -> {
            if (connection <= upTo) {
                closeQuietly(server);
                open.remove(server);
                servers.remove(connection);
            }
        });
    }

    /**
     * As {@link #loseServerOfAll}, in the middle of what a server sends next: of the next bytes any
     * server sends, the first is passed on, then its connection and every other one open then lose
     * their server. The client holds the start of a message whose rest never comes.
     */
    public void loseServerMidMessage() {
        cutNext.set(true);
    }

    private void accept() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                Socket server;
                try {
                    server = new Socket(host, targetPort);
                } catch (IOException refused) {
                    closeQuietly(client); // the client learns at once, as from the server itself, not after its timeout
                    continue;
                }
                int connection;
                synchronized (this) { // numbered and known together: loseServerOfAll closes what it silences
                    connection = accepted.incrementAndGet();
                    servers.put(connection, server);
                }
                open.add(client);
                open.add(server);
                clientsOpen.incrementAndGet();
                pump(client, server, connection, false);
                pump(server, client, connection, true);
            } catch (IOException e) {
                // closed
            }
        }
    }

    private void pump(Socket from, Socket to, int connection, boolean fromServer) {
        Thread thread = new Thread(() -> {
            byte[] buffer = new byte[16 * 1024];
            // the streams are not closed here: closing one closes its socket, and a silenced side stays open
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                int n;
                while ((n = in.read(buffer)) >= 0) {
                    if (connection <= silentUpTo) {
                        continue; // silenced: taken, never passed on
                    }
                    if (fromServer && n >= 2 && cutNext.compareAndSet(true, false)) {
                        out.write(buffer, 0, 1);
                        out.flush();
                        loseServerOfAll();
                        continue;
                    }
                    out.write(buffer, 0, n);
                    out.flush();
                }
            } catch (IOException e) {
                // one side went away
            } finally {
                if (!fromServer) {
                    clientsOpen.decrementAndGet();
                }
                closeQuietly(from);
                open.remove(from);
                servers.values().remove(from);
                if (connection > silentUpTo) {
                    closeQuietly(to);
                    open.remove(to);
                } // silenced: the other side does not learn of it either
            }
        }, "tcp-proxy-pump");
        thread.setDaemon(true);
        thread.start();
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }

    @Override
    public void close() {
        try {
            listener.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        dropAll();
    }
}
