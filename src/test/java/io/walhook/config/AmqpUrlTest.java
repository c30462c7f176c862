package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

class AmqpUrlTest {

    @Test
    void readsCredentialsPortAndTls() {
        AmqpUrl url = AmqpUrl.parse("amqps://walhook:p%40ss%2Bword@broker.example:5999");
        assertThat(url).isEqualTo(new AmqpUrl(true, "broker.example", 5999, "walhook", "p@ss+word"));
        assertThat(url.toString()).isEqualTo("amqps://broker.example:5999");
        assertThat(url.redact("SASL PLAIN as walhook with p@ss+word failed")).isEqualTo("SASL PLAIN as [redacted] with [redacted] failed");
    }

    @Test
    void aShortUserOrPasswordIsTakenOutWhereItStandsAsAWord() {
        AmqpUrl url = AmqpUrl.parse("amqp://mq:a1@broker.example");
        // Artemis: "AMQ229031: Unable to validate user from /127.0.0.1:5000. Username: mq; SSL certificate subject DN: unavailable"
        assertThat(url.redact("Unable to validate user. Username: mq; password a1 (amqp, a1b2)"))
                .isEqualTo("Unable to validate user. Username: [redacted]; password [redacted] (amqp, a1b2)");
    }

    /** A broker's host name holding '_' (a Docker Compose service's) is a host, though java.net.URI reads none. */
    @Test
    void aHostNameHoldingAnUnderscoreIsAHost() {
        assertThat(AmqpUrl.parse("amqp://walhook:p%40ss@rabbit_mq")).isEqualTo(new AmqpUrl(false, "rabbit_mq", 5672, "walhook", "p@ss"));
        assertThat(AmqpUrl.parse("amqp://artemis_1.internal:5999")).isEqualTo(new AmqpUrl(false, "artemis_1.internal", 5999, null, null));
        // Java's TLS cannot check a certificate against such a name: it could never connect
        assertThatThrownBy(() -> AmqpUrl.parse("amqps://walhook:Zq9xW@rabbit_mq")).hasMessageStartingWith(AmqpUrl.VARIABLE)
                .hasMessageContaining("rabbit_mq").hasMessageContaining("'_'").hasMessageNotContaining("Zq9xW");
    }

    @Test
    void defaultsPortsAndAnonymous() {
        assertThat(AmqpUrl.parse("amqp://localhost")).isEqualTo(new AmqpUrl(false, "localhost", 5672, null, null));
        assertThat(AmqpUrl.parse(" amqps://localhost/ ").port()).isEqualTo(5671);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "http://broker:5672      | WALHOOK_AMQP_URL must start with amqp:// or amqps://, not http://",
        "broker:5672             | WALHOOK_AMQP_URL must start with amqp:// or amqps://, not a URL without a scheme",
        // its scheme left out: the user name read as the scheme, and the password as the port, are not repeated
        "pa55:x@broker           | WALHOOK_AMQP_URL must start with amqp:// or amqps://, not a URL without a scheme",
        "amqp://walhook:70000556 | WALHOOK_AMQP_URL has a port outside 1 to 65535 (or, its @host left out, a password",
        "amqp://                 | WALHOOK_AMQP_URL is not a URL",
        "amqp://broker/orders    | WALHOOK_AMQP_URL has a path (/orders); addresses belong in WALHOOK_SUBSCRIPTIONS_<NAME>_AMQP_ADDRESS",
        "amqp://broker?x=1       | WALHOOK_AMQP_URL has parameters (after '?'), which walhook does not read",
        "//u:pa55@broker         | WALHOOK_AMQP_URL must start with amqp:// or amqps://, not a URL without a scheme",
        "amqp://bro ker          | WALHOOK_AMQP_URL is not a URL",
        "amqp://u:1234/pa55@broker | WALHOOK_AMQP_URL has a path; addresses belong in WALHOOK_SUBSCRIPTIONS_<NAME>_AMQP_ADDRESS (percent-encode",
        "amqp://u:1234/x#pa55@broker | WALHOOK_AMQP_URL has a path; addresses belong in WALHOOK_SUBSCRIPTIONS_<NAME>_AMQP_ADDRESS (percent-encode",
        // a '#' in the password made the rest a fragment, and the user the host, the password's digits its port
        "amqp://walhook:4417#pa55@broker | WALHOOK_AMQP_URL has a fragment (after '#'); percent-encode '/', '?', '#' and '@' in a password",
    })
    void namesTheVariableAndTheProblem(String text, String message) {
        assertThatThrownBy(() -> AmqpUrl.parse(text)).isInstanceOf(ConfigException.class).hasMessageStartingWith(message)
                .hasMessageNotContaining("pa55").hasMessageNotContaining("70000556");
    }
}
