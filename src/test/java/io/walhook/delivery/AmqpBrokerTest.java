package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;

import org.apache.qpid.proton.amqp.Symbol;
import org.apache.qpid.proton.amqp.messaging.Accepted;
import org.apache.qpid.proton.amqp.messaging.Modified;
import org.apache.qpid.proton.amqp.messaging.Rejected;
import org.apache.qpid.proton.amqp.messaging.Released;
import org.apache.qpid.proton.amqp.transport.ErrorCondition;
import org.junit.jupiter.api.Test;

/** The outcome of each settlement and the CloudEvents AMQP binding's properties (the broker paths are in AmqpDeliveryIT). */
class AmqpBrokerTest {

    @Test
    void onlyAcceptedIsDeliveredAndEveryOtherOutcomeIsNamed() {
        assertThat(AmqpBroker.outcome(Accepted.getInstance()).outcome()).isEqualTo(Transport.Outcome.DELIVERED);
        Rejected rejected = new Rejected();
        rejected.setError(new ErrorCondition(Symbol.valueOf("amqp:not-found"), "no such address"));
        assertThat(AmqpBroker.outcome(rejected)).extracting(Transport.Attempt::outcome, Transport.Attempt::problem)
                .containsExactly(Transport.Outcome.RETRY, "rejected: amqp:not-found no such address");
        assertThat(AmqpBroker.outcome(Released.getInstance()).problem()).isEqualTo("released");
        Modified modified = new Modified();
        modified.setUndeliverableHere(true);
        assertThat(AmqpBroker.outcome(modified).problem()).isEqualTo("modified (undeliverable here)");
        assertThat(AmqpBroker.outcome(null).outcome()).isEqualTo(Transport.Outcome.RETRY);
    }

    @Test
    void binaryCloudEventsHeadersBecomePrefixedPropertiesWithPlainValues() {
        assertThat(AmqpBroker.applicationProperties(Map.of("ce-id", "0000000001-0001", "ce-subject", "public.caf%C3%A9%20bar",
                "ce-team", "a+b")))
                .containsEntry("cloudEvents:id", "0000000001-0001")
                .containsEntry("cloudEvents:subject", "public.café bar")
                .containsEntry("cloudEvents:team", "a+b")
                .hasSize(3);
    }
}
