package io.walhook.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.ActiveMQServers;
import org.apache.activemq.artemis.core.server.JournalType;
import org.apache.activemq.artemis.core.settings.impl.AddressSettings;

/**
 * A real Apache ActiveMQ Artemis broker in the test JVM, speaking AMQP 1.0 on a free port of
 * 127.0.0.1, with a persistent journal so it keeps its messages across {@link #restart()}.
 * Addresses are created on first use as queues ({@code ANYCAST}); addresses under
 * {@code refuse.} are never created, so messages sent there are refused.
 */
public final class EmbeddedArtemis implements AutoCloseable {

    private final Path data;
    private final int port;
    private ActiveMQServer server;

    private EmbeddedArtemis(Path data, int port) {
        this.data = data;
        this.port = port;
    }

    public static EmbeddedArtemis start() {
        try {
            EmbeddedArtemis broker = new EmbeddedArtemis(Files.createTempDirectory("walhook-artemis"), Ports.restartable());
            broker.startServer();
            return broker;
        } catch (IOException e) {
            throw new HarnessException("cannot prepare an Artemis broker: " + e.getMessage(), e);
        }
    }

    private void startServer() {
        Configuration config = new ConfigurationImpl()
                .setPersistenceEnabled(true)
                .setJournalType(JournalType.NIO)
                .setJournalDirectory(data.resolve("journal").toString())
                .setBindingsDirectory(data.resolve("bindings").toString())
                .setLargeMessagesDirectory(data.resolve("large").toString())
                .setPagingDirectory(data.resolve("paging").toString())
                .setSecurityEnabled(false)
                .setJMXManagementEnabled(false);
        try {
            config.addAcceptorConfiguration("amqp", "tcp://127.0.0.1:" + port + "?protocols=AMQP");
        } catch (Exception e) {
            throw new HarnessException("bad Artemis acceptor: " + e.getMessage(), e);
        }
        // created on first use and then kept, as a configured queue would be: not deleted when its last
        // consumer leaves (a message routed while it is being deleted could be dropped)
        config.addAddressSetting("#", new AddressSettings().setAutoCreateAddresses(true).setAutoCreateQueues(true)
                .setAutoDeleteAddresses(false).setAutoDeleteQueues(false)
                .setDefaultAddressRoutingType(RoutingType.ANYCAST).setDefaultQueueRoutingType(RoutingType.ANYCAST));
        config.addAddressSetting("refuse.#", new AddressSettings().setAutoCreateAddresses(false).setAutoCreateQueues(false));
        server = ActiveMQServers.newActiveMQServer(config, true); // true: persistence (false would override the journal set above)
        try {
            server.start();
        } catch (Exception e) {
            throw new HarnessException("Artemis did not start on port " + port + ": " + e.getMessage(), e);
        }
    }

    /** {@code amqp://127.0.0.1:<port>} */
    public String url() {
        return "amqp://127.0.0.1:" + port;
    }

    public int port() {
        return port;
    }

    /** Stops the broker (connections drop; the journal stays). */
    public void stop() {
        try {
            server.stop();
        } catch (Exception e) {
            throw new HarnessException("Artemis did not stop: " + e.getMessage(), e);
        }
    }

    /** Starts it again on the same port, from the same journal. */
    public void restart() {
        startServer();
    }

    @Override
    public void close() {
        try {
            if (server != null) {
                server.stop();
            }
        } catch (Exception ignored) {
            // stopping anyway
        }
        try (var files = Files.walk(data)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // a leftover directory under the temp directory
        }
    }

}
