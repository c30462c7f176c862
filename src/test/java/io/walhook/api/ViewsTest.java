package io.walhook.api;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;

/**
 * The view records as the API writes them, with the application's Jackson settings
 * (application.properties: snake case, absent values left out): what openapi.yaml marks nullable
 * is written as null, what is absent is left out.
 */
class ViewsTest {

    private static final ObjectMapper API = new ObjectMapper()
            .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
            .setSerializationInclusion(JsonInclude.Include.NON_ABSENT);

    @Test
    void aDeadLetterWithoutKeyOrErrorShowsBothAsNull() throws Exception {
        JsonNode event = API.readTree("{\"op\":\"truncate\"}");
        JsonNode written = API.valueToTree(new DeadLetterResource.DeadLetter(7, "evt_1", "0/16B3748", 0, null,
                "application/json", null, event, null));
        assertThat(written.has("last_error")).isTrue();
        assertThat(written.get("last_error").isNull()).isTrue();
        assertThat(written.has("key")).isTrue();
        assertThat(written.get("key").isNull()).isTrue();
        assertThat(written.has("event_base64")).as("only for a body that is not JSON").isFalse();
        assertThat(written.get("event").get("op").asText()).isEqualTo("truncate");
        assertThat(written.get("commit_lsn").asText()).isEqualTo("0/16B3748");
    }

    @Test
    void aPageWithoutNextLeavesItOut() {
        JsonNode written = API.valueToTree(new DeadLetterResource.Page(List.of(), null));
        assertThat(written.get("items").isArray()).isTrue();
        assertThat(written.has("next")).isFalse();
    }

    @Test
    void anAmqpDestinationShowsOnlyItsAddress() {
        JsonNode written = API.valueToTree(new SubscriptionView.DestinationView("amqp", null, null, null, "orders"));
        assertThat(written.toString()).isEqualTo("{\"type\":\"amqp\",\"address\":\"orders\"}");
        JsonNode webhook = API.valueToTree(new SubscriptionView.DestinationView("webhook", "https://x.example/h", false,
                List.of(), null));
        assertThat(webhook.toString()).as("headers_set is an empty list, not absent")
                .isEqualTo("{\"type\":\"webhook\",\"url\":\"https://x.example/h\",\"secret_set\":false,\"headers_set\":[]}");
    }
}
