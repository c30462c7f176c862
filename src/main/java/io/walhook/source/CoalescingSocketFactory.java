package io.walhook.source;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.concurrent.locks.LockSupport;

import javax.net.SocketFactory;

import io.quarkus.runtime.annotations.RegisterForReflection;

/**
 * The replication connection's sockets (pgjdbc's {@code socketFactory}): after a read that
 * emptied the socket with little, the next read first waits {@value #WAIT_NANOS} ns so that it
 * carries the messages that arrive meanwhile.
 *
 * <p>The walsender writes each message as it decodes it. A reader keeping up with it found one
 * message per read, and each paid an {@code ioctl}, a {@code read}, often a {@code poll} and a
 * context switch: on the project's 2-core machine the reader thread spent two thirds of its time
 * in those calls, more than decoding. Waiting a millisecond when the last read was short turns
 * that into one read per tens of messages, for at most a millisecond more latency; reads of up to
 * 64 KiB (pgjdbc's own buffer holds 8) carry a backlog in an eighth of the calls. A read that
 * came back long (a backlog) is followed without waiting.
 *
 * <p>With nothing to read, the reader blocks on the socket instead of polling: {@link
 * CoalescingSocket#awaitData} reads into the buffer with a timeout, and pgjdbc, finding bytes
 * {@code available()}, takes its next message from them. The reader gets the socket its
 * connection made from {@link #takeCreated()} (pgjdbc connects on the caller's thread).
 *
 * <p>Instantiated by pgjdbc by name, hence public with a public no-argument constructor, and
 * registered for reflection for the native image.
 */
@RegisterForReflection
public final class CoalescingSocketFactory extends SocketFactory {

    /** How long a read after a short one waits first. */
    static final long WAIT_NANOS = 1_000_000;
    /** A read of fewer bytes than this found the socket (nearly) empty. */
    static final int SHORT_READ = 16 * 1024;
    /** The most one read takes from the socket. */
    static final int BUFFER = 64 * 1024;
    /**
     * The read timeout of pgjdbc's "is a message pending?" check, which sets it in place of the
     * connection's own, reads, takes a timeout for "no", and sets the connection's back. (A
     * connection whose own timeout is this, a status interval of 1 ms, is never taken for the check.)
     */
    static final int PEEK_TIMEOUT_MILLIS = 1;

    /** The socket this thread last made, until taken. */
    private static final ThreadLocal<CoalescingSocket> CREATED = new ThreadLocal<>();

    public CoalescingSocketFactory() {
    }

    @Override
    public Socket createSocket() {
        CoalescingSocket socket = new CoalescingSocket();
        CREATED.set(socket);
        return socket;
    }

    /** The socket of the connection this thread opened last (and forgets it); null if none was made here. */
    static CoalescingSocket takeCreated() {
        CoalescingSocket socket = CREATED.get();
        CREATED.remove();
        return socket;
    }

    @Override
    public Socket createSocket(String host, int port) throws IOException {
        throw unconnected();
    }

    @Override
    public Socket createSocket(String host, int port, InetAddress localHost, int localPort) throws IOException {
        throw unconnected();
    }

    @Override
    public Socket createSocket(InetAddress host, int port) throws IOException {
        throw unconnected();
    }

    @Override
    public Socket createSocket(InetAddress address, int port, InetAddress localAddress, int localPort) throws IOException {
        throw unconnected();
    }

    /** pgjdbc creates its sockets unconnected and connects them itself (with its timeout). */
    private static IOException unconnected() {
        return new IOException("walhook's replication socket factory makes unconnected sockets only");
    }

    /** A socket whose input is a {@link CoalescingInputStream}, and which can be waited on for data. */
    static final class CoalescingSocket extends Socket {
        private CoalescingInputStream in;
        /** The timeout is pgjdbc's check's, set in place of another. */
        private volatile boolean peeking;

        @Override
        public synchronized InputStream getInputStream() throws IOException {
            if (in == null) {
                in = new CoalescingInputStream(super.getInputStream(), () -> peeking);
            }
            return in;
        }

        @Override
        public synchronized void setSoTimeout(int timeout) throws java.net.SocketException {
            int before = getSoTimeout();
            super.setSoTimeout(timeout);
            peeking = timeout == PEEK_TIMEOUT_MILLIS && before != PEEK_TIMEOUT_MILLIS;
        }

        /**
         * Waits up to {@code timeoutMillis} for bytes from the server, keeping them for the next
         * read: true when some are there, false when the time passed. Call it on the thread that
         * reads the connection.
         *
         * @throws java.io.EOFException when the server closed the connection (pgjdbc's non-blocking
         *     read would only keep answering "nothing pending")
         */
        boolean awaitData(int timeoutMillis) throws IOException {
            CoalescingInputStream input = (CoalescingInputStream) getInputStream();
            if (input.buffered() > 0) {
                return true;
            }
            int before = getSoTimeout();
            setSoTimeout(Math.max(1, timeoutMillis));
            try {
                if (input.fillNow() < 0) {
                    throw new java.io.EOFException("the server closed the replication connection");
                }
                return true;
            } catch (SocketTimeoutException nothing) {
                input.lastShort = false; // nothing came for the whole wait: the next read has nothing to wait for
                return false;
            } finally {
                setSoTimeout(before);
            }
        }

        /** Bytes read from the socket that pgjdbc has not taken yet. */
        int buffered() throws IOException {
            return ((CoalescingInputStream) getInputStream()).buffered();
        }

        /** When bytes last came from the server ({@link System#nanoTime}; when the socket was made, before any). */
        long lastHeardNanos() throws IOException {
            return ((CoalescingInputStream) getInputStream()).lastHeardNanos;
        }
    }

    /**
     * Reads the socket in pieces of up to {@value #BUFFER} bytes (pgjdbc asks for 8 KiB at a time),
     * and waits before a read that follows a short one. pgjdbc's check for a pending message (a
     * read with a timeout of {@value #PEEK_TIMEOUT_MILLIS} ms) finding nothing on the socket is
     * answered "no" at once instead of after a wait on the socket: an idle reader, which blocks in
     * {@link CoalescingSocket#awaitData} between checks, woke for that wait once a second.
     */
    static final class CoalescingInputStream extends FilterInputStream {
        private final byte[] buffer = new byte[BUFFER];
        private final java.util.function.BooleanSupplier peeking;
        private int position;
        private int limit;
        private boolean lastShort;
        private long peeksAnswered;
        /** When a read last brought bytes: the reader's sign that the server is there. */
        volatile long lastHeardNanos = System.nanoTime();

        CoalescingInputStream(InputStream in) {
            this(in, () -> false);
        }

        CoalescingInputStream(InputStream in, java.util.function.BooleanSupplier peeking) {
            super(in);
            this.peeking = peeking;
        }

        @Override
        public int read() throws IOException {
            if (position == limit && fill() < 0) {
                return -1;
            }
            return buffer[position++] & 0xFF;
        }

        @Override
        public int read(byte[] into, int offset, int length) throws IOException {
            if (length == 0) {
                return 0;
            }
            if (position == limit && fill() < 0) {
                return -1;
            }
            int n = Math.min(length, limit - position);
            System.arraycopy(buffer, position, into, offset, n);
            position += n;
            return n;
        }

        @Override
        public int available() throws IOException {
            return position < limit ? limit - position : in.available();
        }

        @Override
        public long skip(long n) throws IOException {
            if (position == limit) {
                return in.skip(n);
            }
            int skipped = (int) Math.min(n, limit - position);
            position += skipped;
            return skipped;
        }

        @Override
        public boolean markSupported() {
            return false;
        }

        int buffered() {
            return limit - position;
        }

        /** Whether the next read from the socket waits first (the last one was short). */
        boolean waitsBeforeNextRead() {
            return lastShort;
        }

        /** Checks for a pending message answered "no" without waiting on the socket. */
        long peeksAnswered() {
            return peeksAnswered;
        }

        /** One read from the socket into the empty buffer; -1 at its end. */
        private int fill() throws IOException {
            if (lastShort) {
                LockSupport.parkNanos(WAIT_NANOS);
            }
            if (peeking.getAsBoolean() && in.available() == 0) {
                peeksAnswered++;
                throw new SocketTimeoutException("nothing to read");
            }
            return fillNow();
        }

        /** As {@link #fill()} without the wait: the caller waited on the socket already. */
        int fillNow() throws IOException {
            int n = in.read(buffer, 0, BUFFER);
            if (n > 0) {
                lastHeardNanos = System.nanoTime();
            }
            position = 0;
            limit = Math.max(n, 0);
            lastShort = n >= 0 && n < SHORT_READ;
            return n;
        }
    }
}
