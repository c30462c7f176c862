package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.util.List;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Names PostgreSQL allows in quoted identifiers (quotes, backslashes, controls, any Unicode) come
 * out of the event JSON escaped and read back exactly, whether they are schema, table or column
 * names, and the per-table and per-transaction fields encoded once are right on every event.
 */
class EventJsonWriterTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void identifiersWithQuotesControlsAndUnicodeAreEscapedAndReadBack() throws IOException {
        String schema = "sch\"ema\\";
        String table = "tàble \t😀";
        String key = "id \"k\"";
        String column = "naïve\ncol";
        ChangeEvent insert = TestEvents.table(schema, table).key(key, TestEvents.INT4).column(column, TestEvents.TEXT)
                .insert("7", "x");
        byte[] bytes = new EventJsonWriter().toJson(insert);
        JsonNode event = JSON.readTree(bytes);
        assertThat(event.get("schema").asText()).isEqualTo(schema);
        assertThat(event.get("table").asText()).isEqualTo(table);
        assertThat(event.get("op").asText()).isEqualTo("insert");
        assertThat(event.get("key").get(key).asInt()).isEqualTo(7);
        assertThat(event.get("new").get(column).asText()).isEqualTo("x");
        assertThat(List.of(event.get("new").fieldNames().next(), event.get("key").fieldNames().next()))
                .containsExactly(key, key);
        // escaped as Jackson would, raw UTF-8 beyond the BMP
        assertThat(new String(bytes, java.nio.charset.StandardCharsets.UTF_8))
                .contains("\"schema\":\"sch\\\"ema\\\\\"", "\"table\":\"tàble \\t😀\"", "\"naïve\\ncol\":\"x\"");
    }

    @Test
    void idsAreTheCommitLsnInSixteenDigitsAndThePositionInAtLeastFour() {
        ChangeEvent insert = TestEvents.table("public", "t").key("id", TestEvents.INT4).insert("1");
        String lsn = insert.tx().commitLsn().hex16();
        assertThat(lsn).hasSize(16);
        for (int seq : new int[] {0, 1, 42, 9_999, 10_000, 123_456, Integer.MAX_VALUE}) {
            ChangeEvent event = ChangeEvent.row(Operation.INSERT, insert.relation(), null, null, insert.newRow(),
                    insert.lsn(), insert.tx(), seq);
            assertThat(event.id()).isEqualTo(String.format(java.util.Locale.ROOT, "%s-%04d", lsn, seq));
        }
        assertThat(insert.id()).isEqualTo(lsn + "-0001");
    }

    @Test
    void everyEventOfATableAndTransactionCarriesItsOwnOperationAndSequence() throws IOException {
        TestEvents.Table orders = TestEvents.table("public", "orders").key("id", TestEvents.INT4).full();
        EventJsonWriter writer = new EventJsonWriter();
        JsonNode insert = JSON.readTree(writer.toJson(orders.insert("1")));
        JsonNode delete = JSON.readTree(writer.toJson(orders.delete("1")));
        JsonNode truncate = JSON.readTree(writer.toJson(orders.truncate()));
        assertThat(List.of(insert.get("op").asText(), delete.get("op").asText(), truncate.get("op").asText()))
                .containsExactly("insert", "delete", "truncate");
        for (JsonNode event : List.of(insert, delete, truncate)) {
            assertThat(event.get("schema").asText()).isEqualTo("public");
            assertThat(event.get("table").asText()).isEqualTo("orders");
            assertThat(event.get("tx").get("commit_time").asText()).isEqualTo("2026-11-29T16:00:00.123456Z");
            assertThat(event.get("tx").get("commit_lsn").asText()).isEqualTo(TestEvents.COMMIT_LSN.toString());
            assertThat(event.get("tx").has("seq")).isTrue();
        }
        assertThat(truncate.get("truncate").get("cascade").isBoolean()).isTrue();
        JsonNode message = JSON.readTree(writer.toJson(TestEvents.message("p", new byte[] {(byte) 0xff}, false)));
        assertThat(message.get("op").asText()).isEqualTo("message");
        assertThat(message.get("schema").isNull()).isTrue();
        assertThat(message.get("table").isNull()).isTrue();
        assertThat(message.get("message").get("content_encoding").asText()).isEqualTo("base64");
    }
}
