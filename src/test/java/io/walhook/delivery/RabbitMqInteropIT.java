package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.InetSocketAddress;
import java.net.Socket;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.qpid.proton.message.Message;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.testing.AmqpReceiver;
import io.walhook.testing.HarnessException;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WalhookProcess;

/**
 * The AMQP end-to-end path against the machine's RabbitMQ (AMQP 1.0 plugin, 127.0.0.1:5672,
 * guest/guest), a broker without an anonymous relay: walhook opens a sender per address. Skips,
 * saying why, where no RabbitMQ with AMQP 1.0 runs; {@code .ci/run} enables the plugin where
 * RabbitMQ is installed.
 */
class RabbitMqInteropIT {

    private static final Duration WAIT = Duration.ofSeconds(90);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int PORT = 5672;

    @Test
    void eventsArriveOnARabbitMqQueueWithTheirIdsInPerRowOrder() throws Exception {
        String queue = "/queue/walhook-interop-" + System.currentTimeMillis();
        AmqpReceiver receiver = rabbitMq(queue);
        PostgresServer pg = TestPostgres.shared();
        String database = pg.createDatabase("rabbit");
        try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE orders (id int PRIMARY KEY, n int)");
        }
        try (receiver;
             WalhookProcess walhook = WalhookProcess.start(Map.of("WALHOOK_SOURCE_URL", pg.sourceUrl(database),
                     "WALHOOK_SLOT", database, "WALHOOK_AMQP_URL", "amqp://guest:guest@127.0.0.1:" + PORT,
                     "WALHOOK_SUBSCRIPTIONS_RABBIT_AMQP_ADDRESS", queue))) {
            walhook.awaitReady(WAIT);
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute("INSERT INTO orders SELECT g, 0 FROM generate_series(1, 10) g");
                for (int n = 1; n <= 3; n++) {
                    s.execute("UPDATE orders SET n = " + n);
                }
            }
            try {
                await().atMost(WAIT).until(() -> receiver.messages().size() >= 40);
            } catch (org.awaitility.core.ConditionTimeoutException e) {
                throw new AssertionError(receiver.messages().size() + " of 40 messages arrived; walhook:\n" + walhook.output(), e);
            }
            List<Integer> row3 = new ArrayList<>();
            for (Message m : receiver.messages()) {
                JsonNode event = JSON.readTree(AmqpReceiver.body(m));
                assertThat(String.valueOf(m.getMessageId())).isEqualTo(event.get("id").asText());
                assertThat(m.getContentType()).isEqualTo("application/json");
                assertThat(m.isDurable()).isTrue();
                if (event.at("/new/id").asInt() == 3) {
                    row3.add(event.at("/new/n").asInt());
                }
            }
            assertThat(row3).containsExactly(0, 1, 2, 3);
            assertThat(walhook.output()).contains("a sender per address");
        }
    }

    /** A consumer of the queue on the machine's RabbitMQ, or a skip naming what is missing. */
    private static AmqpReceiver rabbitMq(String queue) {
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress("127.0.0.1", PORT), 1000);
        } catch (java.io.IOException e) {
            Assumptions.abort("no RabbitMQ on 127.0.0.1:" + PORT + " (" + e.getMessage() + "): the RabbitMQ interop test"
                    + " runs where RabbitMQ with its rabbitmq_amqp1_0 plugin does");
        }
        try {
            return AmqpReceiver.start("127.0.0.1", PORT, "guest", "guest", queue);
        } catch (HarnessException e) {
            Assumptions.abort("127.0.0.1:" + PORT + " does not speak AMQP 1.0 to guest/guest (" + e.getMessage()
                    + "): enable it with 'rabbitmq-plugins enable rabbitmq_amqp1_0'");
            throw e;
        }
    }
}
