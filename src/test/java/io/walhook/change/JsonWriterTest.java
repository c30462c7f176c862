package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.ObjectMapper;

import net.jqwik.api.Assume;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.CharRange;
import net.jqwik.api.constraints.Chars;

import io.walhook.pgoutput.Lsn;

/**
 * The JSON buffer events are written with: separators from the nesting, Jackson's escapes byte for
 * byte (walhook wrote events with Jackson's byte generator before, and receivers may compare bytes
 * or signatures across versions), numbers, base64, and clear errors for a broken structure.
 */
class JsonBufferTest {

    /** What walhook wrote strings with before: Jackson's UTF-8 generator, pairs beyond the BMP as raw UTF-8. */
    private static final JsonFactory JACKSON = JsonFactory.builder()
            .enable(JsonWriteFeature.COMBINE_UNICODE_SURROGATES_IN_UTF8).build();
    private static final ObjectMapper MAPPER = new ObjectMapper();

    @Test
    void separatesValuesByNesting() throws IOException {
        JsonWriter json = new JsonWriter(16);
        json.startObject()
                .name("a").number(1)
                .name(JsonWriter.encodeName("b")).startArray().number(2).nullValue().startArray().endArray()
                .startObject().endObject().bool(true).bool(false).endArray()
                .name("c").startObject().name("d").string("e").endObject()
                .name("f").rawValue("{\"g\":[1]}".getBytes(StandardCharsets.UTF_8))
                .endObject();
        String text = json.toString();
        assertThat(text).isEqualTo("{\"a\":1,\"b\":[2,null,[],{},true,false],\"c\":{\"d\":\"e\"},\"f\":{\"g\":[1]}}");
        assertThat(MAPPER.readTree(text).get("b").size()).isEqualTo(6);
    }

    @Test
    void lsnsAreWrittenAsPostgresSpellsThem() throws IOException {
        long[] values = {0L, 1L, 0x16_B374_D848L, 0xFFFF_FFFFL, 0x1_0000_0000L, 0xABCD_EF01_2345_6789L, -1L};
        for (long value : values) {
            Lsn lsn = Lsn.of(value);
            // a buffer that must grow for it, between other values
            JsonWriter json = new JsonWriter(1).startArray().number(1).lsn(lsn).string("x").endArray();
            assertThat(json.toString()).as(lsn.toString()).isEqualTo("[1,\"" + lsn + "\",\"x\"]");
            assertThat(Lsn.parse(MAPPER.readTree(json.toString()).get(1).asText())).isEqualTo(lsn);
        }
        assertThat(new JsonWriter().lsn(Lsn.of(-1L)).toString()).isEqualTo("\"FFFFFFFF/FFFFFFFF\"");
        assertThat(new JsonWriter().lsn(Lsn.of(0x16_B374_D848L)).toString()).isEqualTo("\"16/B374D848\"");
    }

    @Test
    void resetStartsAFreshDocumentAndRootValuesTakeNoSeparator() {
        JsonWriter json = new JsonWriter();
        json.startObject().name("x").startArray().number(1);
        json.reset().startObject().name("y").number(2).endObject();
        assertThat(json.toString()).isEqualTo("{\"y\":2}");
        json.reset().string("a").number(1);
        assertThat(json.toString()).isEqualTo("\"a\"1");
        assertThat(json.size()).isEqualTo(4);
    }

    @Test
    void escapesExactlyWhatJacksonEscapes() throws IOException {
        StringBuilder all = new StringBuilder();
        for (char c = 0; c < 0x100; c++) {
            all.append(c);
        }
        all.append("\u2028\u2029\uFFFF😀𝄞");
        String text = all.toString();
        assertThat(written(text)).isEqualTo(jackson(text));
        assertThat(written("\u0001\u001f\u007f\"\\/")).isEqualTo("\"\\u0001\\u001F\u007f\\\"\\\\/\"");
        assertThat(written("\b\t\n\f\r")).isEqualTo("\"\\b\\t\\n\\f\\r\"");
    }

    @Property(tries = 2000)
    void stringsAsJacksonWritesThem(@ForAll String text) throws IOException {
        Assume.that(wellFormed(text));
        assertThat(written(text)).isEqualTo(jackson(text));
    }

    @Property(tries = 2000)
    void controlsAndQuotesAsJacksonWritesThem(@ForAll @CharRange(from = 0, to = 0x7f) @Chars({'ü', '€'}) String text)
            throws IOException {
        assertThat(written(text)).isEqualTo(jackson(text));
    }

    @Test
    void aNullStringIsNull() {
        assertThat(new JsonWriter().startArray().string(null).endArray().toString()).isEqualTo("[null]");
    }

    @Test
    void loneSurrogatesBecomeTheReplacementCharacter() throws IOException {
        String lone = "a\uD83Db\uDE00";
        JsonWriter json = new JsonWriter();
        json.string(lone);
        assertThat(json.toString()).isEqualTo("\"a\uFFFDb\uFFFD\"");
        assertThat(MAPPER.readTree(json.toByteArray()).textValue()).isEqualTo("a\uFFFDb\uFFFD");
    }

    @Test
    void numbersAsJavaSpellsThem() {
        for (long n : new long[] {0, 1, -1, 9, 10, 99, 100, 4294967295L, Long.MAX_VALUE, Long.MIN_VALUE, Long.MIN_VALUE + 1}) {
            JsonWriter json = new JsonWriter(16);
            json.startArray().number(n).number(n).endArray();
            assertThat(json.toString()).isEqualTo("[" + n + "," + n + "]");
        }
        char[] digits = "x-12.5e3x".toCharArray();
        assertThat(new JsonWriter().number(digits, 1, 7).toString()).isEqualTo("-12.5e3");
    }

    @Test
    void base64AsTheJdkEncodesIt() {
        byte[] data = new byte[300];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 37);
        }
        for (int length = 0; length < 10; length++) {
            for (int offset : new int[] {0, 1, 2}) {
                byte[] slice = java.util.Arrays.copyOfRange(data, offset, offset + length);
                assertThat(new JsonWriter(16).base64(data, offset, length).toString())
                        .isEqualTo('"' + Base64.getEncoder().encodeToString(slice) + '"');
            }
        }
        assertThat(new JsonWriter(16).base64(data, 0, data.length).toString())
                .isEqualTo('"' + Base64.getEncoder().encodeToString(data) + '"');
    }

    @Test
    void utf8StringsEscapeAsciiAndCopyTheRest() throws IOException {
        String text = "ü\"\\\n€😀\u0000";
        byte[] utf8 = ("xx" + text).getBytes(StandardCharsets.UTF_8);
        JsonWriter json = new JsonWriter(16);
        json.utf8String(utf8, 2, utf8.length - 2);
        assertThat(json.toString()).isEqualTo(jackson(text));
        char[] chars = text.toCharArray();
        assertThat(new JsonWriter(16).string(chars, 0, chars.length).toString()).isEqualTo(jackson(text));
        char[] raw = "[\"ü😀\"]".toCharArray();
        assertThat(new JsonWriter(16).rawValue(raw, 0, raw.length).toString()).isEqualTo("[\"ü😀\"]");
    }

    @Test
    void encodedNamesAndStringsAreWhatNameAndStringWrite() {
        String name = "col \"ü\" \t";
        JsonWriter direct = new JsonWriter().startObject().name(name).string(name).endObject();
        JsonWriter encoded = new JsonWriter().startObject().name(JsonWriter.encodeName(name))
                .rawValue(JsonWriter.encodeString(name)).endObject();
        assertThat(encoded.toString()).isEqualTo(direct.toString()).isEqualTo("{\"col \\\"ü\\\" \\t\":\"col \\\"ü\\\" \\t\"}");
    }

    @Test
    void fieldsEncodedOnceJoinAnObjectWithItsCommas() {
        byte[] pair = new JsonWriter().startObject().name("a").number(1).name("b").string("x").toFieldBytes();
        assertThat(new String(pair, StandardCharsets.UTF_8)).isEqualTo("\"a\":1,\"b\":\"x\"");
        JsonWriter json = new JsonWriter(8).startObject().fields(pair).name("c").nullValue().fields(pair).endObject();
        assertThat(json.toString()).isEqualTo("{\"a\":1,\"b\":\"x\",\"c\":null,\"a\":1,\"b\":\"x\"}");
        assertThatThrownBy(() -> new JsonWriter().startArray().toFieldBytes()).isInstanceOf(IllegalStateException.class)
                .hasMessage("not the fields of one open object: [");
        assertThatThrownBy(() -> new JsonWriter().startObject().name("a").toFieldBytes())
                .isInstanceOf(IllegalStateException.class);
    }

    @Test
    void refusesABrokenStructure() {
        assertThatThrownBy(() -> new JsonWriter().endObject()).isInstanceOf(IllegalStateException.class)
                .hasMessage("'}' without an open object or array");
        assertThatThrownBy(() -> new JsonWriter().startObject().name("a").endObject())
                .isInstanceOf(IllegalStateException.class).hasMessage("a field name without its value before '}'");
        JsonWriter deep = new JsonWriter();
        for (int i = 0; i < 62; i++) {
            deep.startArray();
        }
        assertThatThrownBy(deep::startArray).isInstanceOf(IllegalStateException.class)
                .hasMessage("JSON nested deeper than 62 levels");
        for (int i = 0; i < 62; i++) {
            deep.endArray();
        }
        assertThat(deep.toString()).isEqualTo("[".repeat(62) + "]".repeat(62));
    }

    private static String written(String text) {
        JsonWriter json = new JsonWriter(8);
        json.string(text);
        return json.toString();
    }

    private static String jackson(String text) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (JsonGenerator generator = JACKSON.createGenerator(out)) {
            generator.writeString(text);
        }
        return out.toString(StandardCharsets.UTF_8);
    }

    private static boolean wellFormed(String text) {
        return new String(text.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8).equals(text);
    }
}
