package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.pgoutput.PgOutputMessage;
import io.walhook.pgoutput.ReplicaIdentity;
import io.walhook.pgoutput.TupleData;

/**
 * Each value rule of docs/events.md ("Values") on PostgreSQL's own text output (captured from a server
 * with walhook's session settings), written into a {@link JsonWriter} and read back by Jackson's
 * parser, which must accept it.
 */
class ValueConvertersTest {

    static final long BOOL = 16, BYTEA = 17, CHAR = 18, NAME = 19, INT8 = 20, INT2 = 21, INT4 = 23, TEXT = 25, OID = 26,
            JSON = 114, XML = 142, FLOAT4 = 700, FLOAT8 = 701, MONEY = 790, INET = 869, BPCHAR = 1042, VARCHAR = 1043,
            DATE = 1082, TIME = 1083, TIMESTAMP = 1114, TIMESTAMPTZ = 1184, INTERVAL = 1186, TIMETZ = 1266,
            NUMERIC = 1700, UUID = 2950, JSONB = 3802, INT4RANGE = 3904;

    static final ObjectMapper MAPPER = new ObjectMapper();

    private final ValueConverters converters = new ValueConverters();

    /** The JSON one converter writes for one text value; fails unless it is well-formed UTF-8 and JSON. */
    static String json(ValueConverter converter, String text) {
        return json(converter, TupleData.builder().text(text).build());
    }

    static String json(ValueConverter converter, TupleData tuple) {
        JsonWriter json = new JsonWriter(8);
        converter.write(json, tuple, 0);
        byte[] bytes = json.toByteArray();
        String text = new String(bytes, StandardCharsets.UTF_8);
        // compared as bytes: decoding would hide malformed UTF-8 behind U+FFFD
        assertThat(bytes).as("well-formed UTF-8").isEqualTo(text.getBytes(StandardCharsets.UTF_8));
        try {
            MAPPER.readTree(bytes);
        } catch (IOException e) {
            throw new AssertionError("not JSON: " + text, e);
        }
        return text;
    }

    String json(long typeOid, String text) {
        return json(converters.forType(typeOid, null, null), text);
    }

    @ParameterizedTest(name = "{0}: {1} -> {2}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "21   | -32768               | -32768",
        "23   | 2147483647           | 2147483647",
        "20   | -9223372036854775808 | -9223372036854775808",
        "26   | 4294967295           | 4294967295",
        "23   | 0                    | 0",
    })
    void integersAreJsonNumbers(long oid, String text, String expected) {
        assertThat(json(oid, text)).isEqualTo(expected);
    }

    @ParameterizedTest(name = "{0}: {1} -> {2}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "701 | 1.5                     | 1.5",
        "701 | 0.1                     | 0.1",
        "701 | 1e+20                   | 1e+20",
        "701 | 1.5e+300                | 1.5e+300",
        "700 | 1e-07                   | 1e-07",
        "701 | 123456789012            | 123456789012",
        "701 | 2.2250738585072014e-308 | 2.2250738585072014e-308",
        "701 | -0                      | -0.0",
        "700 | -0                      | -0.0",
        "701 | NaN                     | `\"NaN\"`",
        "701 | Infinity                | `\"Infinity\"`",
        "700 | -Infinity               | `\"-Infinity\"`",
    })
    void floatsAreNumbersAndTheirSpecialValuesStrings(long oid, String text, String expected) {
        assertThat(json(oid, text)).isEqualTo(expected);
    }

    @ParameterizedTest(name = "{0} -> {1}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "12.50                                                   | 12.50",
        "0.0000000001                                            | 0.0000000001",
        "-1000                                                   | -1000",
        "0                                                       | 0",
        "123456789012345678901234567890.123456789012345678901234 | 123456789012345678901234567890.123456789012345678901234",
        "NaN                                                     | `\"NaN\"`",
        "Infinity                                                | `\"Infinity\"`",
        "-Infinity                                               | `\"-Infinity\"`",
    })
    void numericKeepsEveryDigit(String text, String expected) {
        assertThat(json(NUMERIC, text)).isEqualTo(expected);
    }

    @Test
    void numericDigitsSurviveAReader() throws IOException {
        String digits = "-98765432109876543210987654321.000000000000000000000000000001";
        String out = json(NUMERIC, digits);
        assertThat(MAPPER
                .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
                .readTree(out).decimalValue().toPlainString()).isEqualTo(digits);
    }

    @Test
    void textThatIsNoJsonNumberIsWrittenAsAString() {
        assertThat(json(INT4, "012")).isEqualTo("\"012\"");
        assertThat(json(NUMERIC, "1.")).isEqualTo("\"1.\"");
        assertThat(json(FLOAT8, "1e")).isEqualTo("\"1e\"");
        assertThat(json(FLOAT8, "inf")).isEqualTo("\"inf\"");
        assertThat(json(NUMERIC, "")).isEqualTo("\"\"");
        assertThat(json(NUMERIC, "-")).isEqualTo("\"-\"");
    }

    @Test
    void booleansAreTrueAndFalse() {
        assertThat(json(BOOL, "t")).isEqualTo("true");
        assertThat(json(BOOL, "f")).isEqualTo("false");
        assertThat(json(BOOL, "yes")).isEqualTo("\"yes\"");
    }

    @Test
    void jsonAndJsonbAreEmbedded() {
        assertThat(json(JSONB, "{\"a\": [1, \"x\\\"y\", null, {\"b\": 2.50}]}"))
                .isEqualTo("{\"a\": [1, \"x\\\"y\", null, {\"b\": 2.50}]}");
        assertThat(json(JSON, "{\n  \"k\" : \"ünï \\u0000\"\n}")).isEqualTo("{\n  \"k\" : \"ünï \\u0000\"\n}");
        assertThat(json(JSONB, "null")).isEqualTo("null");
        assertThat(json(JSONB, "\"s\"")).isEqualTo("\"s\"");
        assertThat(json(JSON, "[]")).isEqualTo("[]");
    }

    @ParameterizedTest(name = "{0} -> {1}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "\\x                 | `\"\"`",
        "\\x00               | `\"AA==\"`",
        "\\x00ff             | `\"AP8=\"`",
        "\\x00ff10           | `\"AP8Q\"`",
        "\\xDEADBEEF         | `\"3q2+7w==\"`",
        "\\xfbff             | `\"+/8=\"`",
        "\\x48656c6c6f       | `\"SGVsbG8=\"`",
        "abc\\000\\\\\\377   | `\"YWJjAFz/\"`",
        "\\x0                | `\"\\\\x0\"`",
        "\\xzz               | `\"\\\\xzz\"`",
        "\\x１２             | `\"\\\\x１２\"`",
    })
    void byteaIsStandardBase64WithPadding(String text, String expected) {
        assertThat(json(BYTEA, text)).isEqualTo(expected);
    }

    @ParameterizedTest(name = "{0} -> {1}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "2026-11-29 16:00:00.123456+00    | 2026-11-29T16:00:00.123456Z",
        "2026-11-29 16:00:00+00           | 2026-11-29T16:00:00Z",
        "2026-11-29 16:00:00.5+00         | 2026-11-29T16:00:00.5Z",
        "2026-11-29 21:30:00.5+05:30      | 2026-11-29T16:00:00.5Z",
        "2026-11-29 12:30:00.5-03:30      | 2026-11-29T16:00:00.5Z",
        "2026-01-01 03:00:00-08           | 2026-01-01T11:00:00Z",
        "2026-01-01 01:00:00+02           | 2025-12-31T23:00:00Z",
        "1900-01-01 05:21:10+05:21:10     | 1900-01-01T00:00:00Z",
        "0044-03-15 12:00:00+00 BC        | -0043-03-15T12:00:00Z",
        "0044-03-15 17:53:28+05:53:28 BC  | -0043-03-15T12:00:00Z",
        "0001-12-31 23:00:00+00 BC        | 0000-12-31T23:00:00Z",
        "0001-01-01 00:30:00+01           | 0000-12-31T23:30:00Z",
        "4714-11-24 00:00:00+00 BC        | -4713-11-24T00:00:00Z",
        "294276-12-31 23:59:59.999999+00  | +294276-12-31T23:59:59.999999Z",
        "9999-12-31 23:59:59+00           | 9999-12-31T23:59:59Z",
        "10000-01-01 00:00:00+00          | +10000-01-01T00:00:00Z",
        "infinity                         | infinity",
        "-infinity                        | -infinity",
    })
    void timestamptzIsIso8601InUtc(String text, String expected) {
        assertThat(json(TIMESTAMPTZ, text)).isEqualTo('"' + expected + '"');
    }

    @Test
    void timestamptzWrittenByJavaTimeParsesBackToTheSameInstant() {
        String out = json(TIMESTAMPTZ, "0044-03-15 17:53:28.25+05:53:28 BC");
        java.time.Instant instant = java.time.Instant.parse(out.substring(1, out.length() - 1));
        assertThat(instant).isEqualTo(java.time.OffsetDateTime.of(-43, 3, 15, 12, 0, 0, 250_000_000,
                java.time.ZoneOffset.UTC).toInstant());
    }

    @ParameterizedTest(name = "{0} -> {1}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "2026-11-29 16:00:00.123456  | 2026-11-29T16:00:00.123456",
        "2026-11-29 16:00:00         | 2026-11-29T16:00:00",
        "0001-01-01 00:00:00 BC      | 0000-01-01T00:00:00",
        "0002-06-30 12:34:56.7 BC    | -0001-06-30T12:34:56.7",
        "infinity                    | infinity",
        "-infinity                   | -infinity",
        "2026-11-29 16:00:00+00      | 2026-11-29 16:00:00+00",
        "2026-11-29 16:00:00.        | 2026-11-29 16:00:00.",
        "2026-11-29 16:00:00.1234567890 | 2026-11-29 16:00:00.1234567890",
        "2026-11-29 16:00            | 2026-11-29 16:00",
        "2026-11-29T16:00:00         | 2026-11-29T16:00:00",
    })
    void timestampIsIso8601LocalDateTime(String text, String expected) {
        assertThat(json(TIMESTAMP, text)).isEqualTo('"' + expected + '"');
    }

    @ParameterizedTest(name = "{0} -> {1}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "2026-11-29      | 2026-11-29",
        "0044-03-15 BC   | -0043-03-15",
        "0001-01-01 BC   | 0000-01-01",
        "4713-01-01 BC   | -4712-01-01",
        "5874897-12-31   | +5874897-12-31",
        "infinity        | infinity",
        "-infinity       | -infinity",
        "29.11.2026      | 29.11.2026",
        "2026-13-01      | 2026-13-01",
    })
    void dateIsIso8601(String text, String expected) {
        assertThat(json(DATE, text)).isEqualTo('"' + expected + '"');
    }

    @Test
    void timeIsWrittenAsPostgresqlPrintsIt() {
        assertThat(json(TIME, "16:00:00.123456")).isEqualTo("\"16:00:00.123456\"");
        assertThat(json(TIME, "24:00:00")).isEqualTo("\"24:00:00\"");
        assertThat(json(TIMETZ, "16:00:00+05:30")).isEqualTo("\"16:00:00+05:30\"");
    }

    @ParameterizedTest(name = "{0}: {1}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
        "2950 | 0b3a4a0e-6c1f-4b0e-9a3e-1c2d3e4f5a6b",
        "1186 | 1 day 02:03:04.5",
        "1186 | -1 years -2 mons",
        "790  | $12.50",
        "869  | 192.168.0.1/24",
        "3904 | [1,5)",
        "142  | <a b=\"c\">d</a>",
        "18   | x",
        "19   | pg_catalog",
        "1042 | `padded   `",
        "1043 | ``",
        "25   | ünïcödé ✓ 😀 中文",
    })
    void otherTypesAreTheirTextInAString(long oid, String text) throws IOException {
        String out = json(oid, text);
        assertThat(MAPPER.readTree(out).textValue()).isEqualTo(text);
        assertThat(out).isEqualTo('"' + text.replace("\"", "\\\"") + '"');
    }

    @Test
    void stringsEscapeQuotesBackslashesAndControlCharacters() {
        assertThat(json(TEXT, "a\"b\\c/d")).isEqualTo("\"a\\\"b\\\\c/d\"");
        assertThat(json(TEXT, "line1\nline2\r\ttab\b\f")).isEqualTo("\"line1\\nline2\\r\\ttab\\b\\f\"");
        assertThat(json(TEXT, "\u0001\u001f\u007f")).isEqualTo("\"\\u0001\\u001F\u007f\"");
        assertThat(json(TEXT, "sep\u2028par\u2029")).isEqualTo("\"sep\u2028par\u2029\"");
        assertThat(json(TEXT, "")).isEqualTo("\"\"");
    }

    @Test
    void charsOutsideTheBasicPlaneStayRawUtf8() throws IOException {
        ValueConverter textArray = converters.forType(1009, null, null);
        // through the chars of the array parser, and through the bytes of a text column
        TupleData tuple = TupleData.builder().text("{😀}").build();
        assertThat(json(textArray, tuple)).isEqualTo("[\"😀\"]");
        assertThat(json(converters.forType(TEXT, null, null), "😀")).isEqualTo("\"😀\"");
        assertThat(MAPPER.readTree(json(textArray, tuple)).get(0).textValue()).isEqualTo("😀");
    }

    @Test
    void malformedUtf8BecomesReplacementCharacters() {
        TupleData tuple = TupleData.builder()
                .textBytes(new byte[] {'a', (byte) 0xff, 'b', (byte) 0xc3, (byte) 0x28, (byte) 0xed, (byte) 0xa0, (byte) 0x80})
                .build();
        String expected = '"' + new String(tuple.bytes(0), StandardCharsets.UTF_8) + '"';
        assertThat(expected).contains("\ufffd");
        assertThat(json(converters.forType(TEXT, null, null), tuple)).isEqualTo(expected);
        assertThat(json(converters.forType(JSON, null, null),
                TupleData.builder().textBytes(new byte[] {'"', (byte) 0xc0, (byte) 0x80, '"'}).build()))
                .isEqualTo("\"\ufffd\ufffd\"");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({
        "ed a0 80", // an encoded surrogate (CESU-8)
        "e0 80 80", // overlong
        "c1 bf", // overlong
        "f4 90 80 80", // past U+10FFFF
        "f8 88 80 80 80", // five bytes
        "e2 82", // truncated
        "80", // lone continuation byte
    })
    void eachKindOfMalformedUtf8IsReplaced(String hex) {
        byte[] bad = java.util.HexFormat.ofDelimiter(" ").parseHex(hex);
        byte[] value = new byte[bad.length + 4];
        value[0] = 'o';
        value[1] = 'k';
        System.arraycopy(bad, 0, value, 2, bad.length);
        value[bad.length + 2] = (byte) 0xc3; // é, well-formed, after the bad bytes
        value[bad.length + 3] = (byte) 0xa9;
        String expected = new String(value, StandardCharsets.UTF_8);
        assertThat(expected).startsWith("ok\ufffd").endsWith("\ufffdé");
        assertThat(json(converters.forType(TEXT, null, null), TupleData.builder().textBytes(value).build()))
                .isEqualTo('"' + expected + '"');
    }

    @Test
    void valuesLongerThanTheRetainedBuffersAreWrittenWhole() {
        String big = "é".repeat(ConverterBuffers.RETAIN_LIMIT) + "\"";
        ValueConverter text = converters.forType(TEXT, null, null);
        String out = json(text, big);
        assertThat(out).hasSize(big.length() + 3).startsWith("\"éé").endsWith("é\\\"\"");
        // and the buffers still work for small values afterwards
        assertThat(json(text, "ok")).isEqualTo("\"ok\"");
        String numbers = "{" + "1234567,".repeat(200_000) + "NULL}";
        String array = json(converters.forType(1007, null, null), numbers);
        assertThat(array).startsWith("[1234567,1234567,").endsWith(",1234567,null]");
        assertThat(json(converters.forType(1007, null, null), "{1}")).isEqualTo("[1]");
    }

    @Test
    void jsonValuesLargerThanTheBufferAreCopiedWhole() {
        // the buffer starts at 16 bytes and grows: values that do not fit in what is left of it
        String big = "{\"k\": \"" + "ü".repeat(6000) + "\"}";
        ValueConverter jsonb = converters.forType(JSONB, null, null);
        TupleData tuple = TupleData.builder().text(big).text("[1]").build();
        for (int prefix : new int[] {0, 10, 4000, 7990}) {
            JsonWriter out = new JsonWriter(16);
            out.startArray().string("p".repeat(prefix));
            jsonb.write(out, tuple, 0);
            jsonb.write(out, tuple, 1);
            out.endArray();
            assertThat(out.toString()).isEqualTo("[\"" + "p".repeat(prefix) + "\"," + big + ",[1]]");
        }
        // a small value at every position around the end of a buffer
        TupleData small = TupleData.builder().text("[1,\"ü\"]").build();
        for (int prefix = 1000; prefix < 1040; prefix++) {
            JsonWriter out = new JsonWriter(1024);
            out.startArray().string("p".repeat(prefix));
            jsonb.write(out, small, 0);
            out.endArray();
            assertThat(out.toString()).isEqualTo("[\"" + "p".repeat(prefix) + "\",[1,\"ü\"]]");
        }
    }

    @Test
    void scratchLeftoversNeverLeakIntoTheNextValue() {
        ValueConverter text = converters.forType(TEXT, null, null);
        ValueConverter number = converters.forType(NUMERIC, null, null);
        ValueConverter bytea = converters.forType(BYTEA, null, null);
        assertThat(json(text, "a long value that fills the buffer")).isEqualTo("\"a long value that fills the buffer\"");
        assertThat(json(number, "7")).isEqualTo("7");
        assertThat(json(bytea, "\\x0102030405060708")).isEqualTo("\"AQIDBAUGBwg=\"");
        // an odd number of hex digits is no hex bytea, even with decoded bytes left behind it
        assertThat(json(bytea, "\\x0a0b0c")).isEqualTo("\"CgsM\"");
        assertThat(json(bytea, "\\x0")).isEqualTo("\"\\\\x0\"");
        assertThat(json(text, "b")).isEqualTo("\"b\"");
        assertThat(json(converters.forType(TIMESTAMPTZ, null, null), "2026-11-29 16:00:00.123456+00"))
                .isEqualTo("\"2026-11-29T16:00:00.123456Z\"");
        assertThat(json(converters.forType(DATE, null, null), "2026-11-29")).isEqualTo("\"2026-11-29\"");
    }

    @Test
    void convertersWriteInsideAnObjectWithSeparators() throws IOException {
        TupleData tuple = TupleData.builder().text("{\"j\": 1}").text("x\"y").text("12.50").text("t")
                .text("\\x00").text("{1,NULL}").text("2026-11-29 16:00:00+00").build();
        List<ValueConverter> columns = List.of(converters.forType(JSONB, null, null), converters.forType(TEXT, null, null),
                converters.forType(NUMERIC, null, null), converters.forType(BOOL, null, null),
                converters.forType(BYTEA, null, null), converters.forType(1007, null, null),
                converters.forType(TIMESTAMPTZ, null, null));
        JsonWriter out = new JsonWriter();
        out.startObject();
        for (int i = 0; i < columns.size(); i++) {
            columns.get(i).write(out.name("c" + i), tuple, i);
        }
        out.endObject();
        String json = out.toString();
        assertThat(json).isEqualTo("{\"c0\":{\"j\": 1},\"c1\":\"x\\\"y\",\"c2\":12.50,\"c3\":true,\"c4\":\"AA==\","
                + "\"c5\":[1,null],\"c6\":\"2026-11-29T16:00:00Z\"}");
        Map<?, ?> parsed = MAPPER.readValue(json, Map.class);
        assertThat(parsed).hasSize(7);
    }

    @Test
    void refusesValuesThatAreNotText() {
        ValueConverter text = converters.forType(TEXT, null, null);
        JsonWriter generator = new JsonWriter();
        TupleData tuple = TupleData.builder().binary(new byte[] {0, 0, 0, 1}).nullValue().unchangedToast().build();
        assertThatThrownBy(() -> text.write(generator, tuple, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("BINARY").hasMessageContaining("binary = true");
        assertThatThrownBy(() -> converters.forType(INT4, null, null).write(generator, tuple, 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("NULL");
        assertThatThrownBy(() -> converters.forType(1007, null, null).write(generator, tuple, 2))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("UNCHANGED_TOAST");
    }

    @Test
    void domainsFollowTheirBaseTypeByName() {
        // pgoutput's Type message for a domain: the domain's OID, the base type's namespace ("" = pg_catalog) and name
        assertThat(json(converters.forType(16385, "", "int4"), "42")).isEqualTo("42");
        assertThat(json(converters.forType(16385, "pg_catalog", "numeric"), "NaN")).isEqualTo("\"NaN\"");
        assertThat(json(converters.forType(16385, "", "_int4"), "{1,NULL}")).isEqualTo("[1,null]");
        assertThat(json(converters.forType(16385, "", "timestamptz"), "2026-11-29 16:00:00+00"))
                .isEqualTo("\"2026-11-29T16:00:00Z\"");
        assertThat(json(converters.forType(16385, "", "jsonb"), "{\"a\": 1}")).isEqualTo("{\"a\": 1}");
        assertThat(json(converters.forType(16385, "", "_box"), "{(1,1),(0,0);(2,2),(1,1)}"))
                .isEqualTo("[\"(1,1),(0,0)\",\"(2,2),(1,1)\"]");
        assertThat(json(converters.forType(16385, "", "citext_like_unknown"), "7")).isEqualTo("\"7\"");
    }

    @Test
    void userTypesAreStringsAndUserArraysArraysOfStrings() {
        assertThat(json(converters.forType(16390, "public", "mood"), "happy")).isEqualTo("\"happy\"");
        assertThat(json(converters.forType(16391, "public", "_mood"), "{happy,NULL,\"NULL\"}"))
                .isEqualTo("[\"happy\",null,\"NULL\"]");
        assertThat(json(converters.forType(16392, "public", "complex"), "(1.5,2)")).isEqualTo("\"(1.5,2)\"");
        assertThat(json(converters.forType(16393, "public", "_complex"), "{\"(1.5,2)\",\"(,\\\"x\\\")\"}"))
                .isEqualTo("[\"(1.5,2)\",\"(,\\\"x\\\")\"]");
        // a user type named like an array that is not one: its text as a string
        assertThat(json(converters.forType(16394, "public", "_notarray"), "plain")).isEqualTo("\"plain\"");
        // a user type in a schema that shadows a built-in name is still a user type
        assertThat(json(converters.forType(16395, "public", "int4"), "42")).isEqualTo("\"42\"");
        // a built-in this release does not know: a string
        assertThat(json(converters.forType(9999, null, null), "x")).isEqualTo("\"x\"");
    }

    @Test
    void relationColumnsAreResolvedThroughTheTypeMessages() {
        PgOutputMessage.Type domain = new PgOutputMessage.Type(null, 16385, "", "int4");
        PgOutputMessage.Type enumType = new PgOutputMessage.Type(null, 16390, "public", "mood");
        PgOutputMessage.Type enumArray = new PgOutputMessage.Type(null, 16391, "public", "_mood");
        Map<Long, PgOutputMessage.Type> types = Map.of(16385L, domain, 16390L, enumType, 16391L, enumArray);
        PgOutputMessage.Relation relation = new PgOutputMessage.Relation(null, 16400, "public", "t",
                ReplicaIdentity.DEFAULT, List.of(
                        new PgOutputMessage.Relation.Column(true, "id", INT8, -1),
                        new PgOutputMessage.Relation.Column(false, "d", 16385, -1),
                        new PgOutputMessage.Relation.Column(false, "m", 16390, -1),
                        new PgOutputMessage.Relation.Column(false, "ms", 16391, -1),
                        new PgOutputMessage.Relation.Column(false, "lost", 16499, -1),
                        new PgOutputMessage.Relation.Column(false, "n", 1231, -1)));
        List<ValueConverter> columns = converters.forRelation(relation, types::get);
        TupleData tuple = TupleData.builder().text("1").text("2").text("ok").text("{ok}").text("3").text("{1.0,NaN}").build();
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < columns.size(); i++) {
            out.append(json(columns.get(i), TupleData.builder().text(tuple.text(i)).build())).append(' ');
        }
        assertThat(out.toString()).isEqualTo("1 2 \"ok\" [\"ok\"] \"3\" [1.0,\"NaN\"] ");
        assertThat(columns.get(0)).isSameAs(columns.get(1));
    }

    @Test
    void unsignedOidsBeyondIntRangeAreUserTypes() {
        assertThat(json(converters.forType(4_000_000_000L, "public", "_t"), "{a}")).isEqualTo("[\"a\"]");
        assertThat(json(converters.forType(4_000_000_000L, "public", "t"), "a")).isEqualTo("\"a\"");
    }
}
