package io.walhook.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.change.ChangeEvent;
import io.walhook.change.TestEvents;

class EventEncoderTest {

    private static final ObjectMapper JSON = new ObjectMapper();
    private final EventEncoder encoder = new EventEncoder("/walhook/shop", Map.of("cluster", "eu 1"));
    private static final TestEvents.Table ORDERS = TestEvents.table("public", "orders").key("id", TestEvents.INT4)
            .column("status", TestEvents.TEXT).column("amount", 1700);
    private final ChangeEvent insert = ORDERS.insert("42", "paid", "12.50");

    private static String text(EventEncoder.Encoded encoded) {
        return new String(encoded.body(), StandardCharsets.UTF_8);
    }

    @Test
    void jsonFormatIsTheEventItself() {
        EventEncoder.Encoded json = encoder.encode(insert, EventFormat.JSON, Projection.ALL);
        assertThat(json.contentType()).isEqualTo("application/json");
        assertThat(json.headers()).isEmpty();
        assertThat(text(json)).isEqualTo("{\"id\":\"0000000001A2B3C0-0001\",\"op\":\"insert\",\"schema\":\"public\","
                + "\"table\":\"orders\",\"key\":{\"id\":42},\"new\":{\"id\":42,\"status\":\"paid\",\"amount\":12.50},"
                + "\"old\":null,\"lsn\":\"0/1A2B3B08\",\"tx\":{\"xid\":7781,\"commit_lsn\":\"0/1A2B3C0\","
                + "\"commit_time\":\"2026-11-29T16:00:00.123456Z\",\"seq\":1}}");
    }

    @Test
    void structuredCloudEventHasEveryRequiredAttributeAndTheEventAsData() throws Exception {
        EventEncoder.Encoded ce = encoder.encode(insert, EventFormat.CLOUDEVENTS, Projection.ALL);
        assertThat(ce.contentType()).isEqualTo("application/cloudevents+json");
        JsonNode event = JSON.readTree(ce.body());
        // CloudEvents 1.0 required attributes: id, source, specversion, type
        assertThat(event.get("specversion").asText()).isEqualTo("1.0");
        assertThat(event.get("id").asText()).isEqualTo("0000000001A2B3C0-0001");
        assertThat(event.get("source").asText()).isEqualTo("/walhook/shop");
        assertThat(event.get("type").asText()).isEqualTo("io.walhook.insert");
        assertThat(event.get("subject").asText()).isEqualTo("public.orders");
        assertThat(event.get("time").asText()).isEqualTo("2026-11-29T16:00:00.123456Z");
        assertThat(event.get("datacontenttype").asText()).isEqualTo("application/json");
        assertThat(event.get("cluster").asText()).isEqualTo("eu 1");
        assertThat(event.get("data")).isEqualTo(JSON.readTree(encoder.encode(insert, EventFormat.JSON, Projection.ALL).body()));
    }

    @Test
    void binaryCloudEventPutsAttributesInPercentEncodedHeaders() {
        ChangeEvent message = TestEvents.message("caf\u00e9 \"x\"", "hi".getBytes(StandardCharsets.UTF_8), true);
        EventEncoder.Encoded ce = encoder.encode(message, EventFormat.CLOUDEVENTS_BINARY, Projection.ALL);
        assertThat(ce.contentType()).isEqualTo("application/json");
        assertThat(ce.headers()).containsEntry("ce-specversion", "1.0")
                .containsEntry("ce-id", message.id())
                .containsEntry("ce-source", "/walhook/shop")
                .containsEntry("ce-type", "io.walhook.message")
                .containsEntry("ce-subject", "caf%C3%A9%20%22x%22")
                .containsEntry("ce-time", "2026-11-29T16:00:00.123456Z")
                .containsEntry("ce-cluster", "eu%201");
        assertThat(text(ce)).startsWith("{\"id\":\"" + message.id() + "\",\"op\":\"message\"");
    }

    /**
     * A database named outside printable ASCII, or with a {@code %}: its {@code source} is
     * percent-encoded in the header as the binding asks (a raw {@code %} failed every AMQP message of
     * it, decoded back there; raw UTF-8 is not a header value), and stays whole in the structured form.
     */
    @Test
    void aSourceOutsidePrintableAsciiIsPercentEncodedInItsHeader() throws Exception {
        EventEncoder named = new EventEncoder("/walhook/sales%eu caf\u00e9", Map.of());
        ChangeEvent message = TestEvents.message("p", "hi".getBytes(StandardCharsets.UTF_8), true);
        assertThat(named.encode(message, EventFormat.CLOUDEVENTS_BINARY, Projection.ALL).headers())
                .containsEntry("ce-source", "/walhook/sales%25eu%20caf%C3%A9");
        assertThat(JSON.readTree(named.encode(message, EventFormat.CLOUDEVENTS, Projection.ALL).body()).get("source").asText())
                .isEqualTo("/walhook/sales%eu caf\u00e9");
    }

    @Test
    void projectionKeepsOnlyTheChosenColumnsOfNewAndOldAndOfAFullKeyAllButThePrimaryKeys() throws Exception {
        ChangeEvent update = ORDERS.full().update(new String[] {"1", "new", "5"}, "1", "paid", "5");
        JsonNode included = JSON.readTree(encoder.encode(update, EventFormat.JSON,
                new Projection(Set.of("status"), Set.of())).body());
        assertThat(included.get("new").toString()).isEqualTo("{\"status\":\"paid\"}");
        assertThat(included.get("old").toString()).isEqualTo("{\"status\":\"new\"}");
        // under FULL the key is the whole row: what the projection leaves out of new and old, it leaves out of key
        // too (an excluded column, a national id say, went out in key)
        assertThat(included.get("key").toString()).isEqualTo("{\"status\":\"new\"}"); // no primary key known here
        JsonNode excluded = JSON.readTree(encoder.encode(update, EventFormat.JSON,
                new Projection(Set.of(), Set.of("amount"))).body());
        assertThat(excluded.get("new").toString()).isEqualTo("{\"id\":1,\"status\":\"paid\"}");
        assertThat(excluded.get("key").toString()).isEqualTo("{\"id\":1,\"status\":\"new\"}");
        assertThat(excluded.toString()).doesNotContain("amount");
        // with a primary key known, its columns stay in key: a delete still says which row went
        ChangeEvent deleted = ORDERS.fullWithPrimaryKey().delete("1", "paid", "5");
        JsonNode identified = JSON.readTree(encoder.encode(deleted, EventFormat.JSON,
                new Projection(Set.of("status"), Set.of())).body());
        assertThat(identified.get("key").toString()).isEqualTo("{\"id\":1,\"status\":\"paid\"}");
        assertThat(identified.get("old").toString()).isEqualTo("{\"status\":\"paid\"}");
        // under the default identity the key is the primary key's, whatever the projection
        ChangeEvent keyed = ORDERS.update("1", "paid", "5");
        assertThat(JSON.readTree(encoder.encode(keyed, EventFormat.JSON, new Projection(Set.of("status"), Set.of())).body())
                .get("key").toString()).isEqualTo("{\"id\":1}");
    }

    @Test
    void rejectsExtensionNamesTheSpecForbids() {
        assertThatThrownBy(() -> new EventEncoder("/x", Map.of("Bad-Name", "v")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("Bad-Name");
    }
}
