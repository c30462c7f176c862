package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;

import io.walhook.pgoutput.PgOutputDecoder;
import io.walhook.pgoutput.PgOutputMessage;
import io.walhook.pgoutput.TupleData;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;

/**
 * Every value rule of docs/events.md ("Values") against a live server: one row holding every type is
 * inserted from a session in Asia/Kolkata, its pgoutput messages are decoded, converters are chosen
 * from the Relation and Type messages, and the JSON they write is compared value by value.
 *
 * <p>Text values come from the output functions of the session that reads the slot (here the one
 * calling {@code pg_logical_slot_peek_binary_changes}), so that session pins walhook's settings;
 * a second reading with the session left in Asia/Kolkata, and a third in America/St_Johns (a
 * negative half-hour offset), must give the same JSON: timestamptz is normalized to UTC whatever
 * offset the server printed.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ValueConversionLiveTest {

    private static final String[] WALHOOK_SETTINGS = {
        "SET DateStyle = 'ISO'", "SET IntervalStyle = 'postgres'", "SET extra_float_digits = 3",
        "SET bytea_output = 'hex'", "SET lc_monetary = 'C'",
    };

    private static final String TABLE = """
            CREATE TABLE every_type (
                id int8 PRIMARY KEY, i2 int2, i4 int4, o oid,
                f4 float4, f8 float8, f8_nan float8, f8_inf float8, f4_ninf float4, f8_negzero float8, f8_exp float8,
                n numeric, n_big numeric, n_small numeric, n_nan numeric, n_inf numeric, n_ninf numeric,
                b bool, b_false bool, j json, jb jsonb, jb_null jsonb, by bytea, by_empty bytea,
                tz timestamptz, tz_bc timestamptz, tz_inf timestamptz, tz_ninf timestamptz, tz_old timestamptz,
                ts timestamp, ts_bc timestamp, ts_ninf timestamp, d date, d_bc date, d_inf date,
                t time, ttz timetz, u uuid, tx text, tx_empty text, vc varchar(10), bp char(5), nm name, ch "char",
                iv interval, m money, x xml, ip inet, cd cidr, mac macaddr, r int4range, nr numrange, bx box,
                ai int4[], ai2 int4[], a_bounds int4[], a_empty int4[], a_text text[], a_num numeric[], a_f8 float8[],
                a_bool bool[], a_jb jsonb[], a_by bytea[], a_tz timestamptz[], a_d date[], a_uuid uuid[], a_box box[],
                a_i8 int8[], a_range int4range[],
                dom posint, dom_arr intlist, e mood, e_arr mood[], comp complex, comp_arr complex[], nothing text
            )""";

    private static final String INSERT = """
            INSERT INTO every_type VALUES (
                9223372036854775807, -32768, 2147483647, 4294967295,
                3.14, 0.1, 'NaN', 'Infinity', '-Infinity', '-0', 1.5e300,
                12.50, 123456789012345678901234567890.123456789012345678901234, 0.0000000001, 'NaN', 'Infinity', '-Infinity',
                true, false, '{"a": [1, "x\\"y"], "u": "ü", "n": null}', '{"nested": {"deep": [1.50, true, {"k": "v"}]}}',
                'null', '\\x00ff80c3fe'::bytea, '',
                '2026-11-29 21:30:00.123456', '0044-03-15 12:00:00+00 BC', 'infinity', '-infinity', '1900-01-01 00:00:00+00',
                '2026-11-29 16:00:00.123456', '0002-06-30 12:34:56.7 BC', '-infinity', '2026-11-29', '0044-03-15 BC', 'infinity',
                '16:00:00.123456', '16:00:00+05:30', '0b3a4a0e-6c1f-4b0e-9a3e-1c2d3e4f5a6b',
                E'ünï 😀 中文 "q" \\\\ \\t\\n\\x01 \\u2028 end', '', 'abc', 'ab', 'a_name', 'x',
                '1 day 02:03:04.5', 12.5, '<a b="c">d</a>', '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03',
                '[1,5)', '(1.5,2.5]', '((2,2),(1,1))',
                '{1,NULL,3}', '{{1,2},{3,4}}', '[0:1]={1,2}', '{}',
                ARRAY['NULL', NULL, '', 'a b', 'q"b\\s', 'x,y', '{}', 'ünï', E'tab\\there', '😀'],
                '{1.50,NaN,Infinity,-Infinity,NULL}', '{-0,NaN,1.5,-Infinity}', '{t,f,NULL}',
                ARRAY['{"a": [1, "x\\"y"]}'::jsonb, 'null'::jsonb, NULL, '[]'::jsonb],
                ARRAY['\\x00ff'::bytea, NULL, ''::bytea],
                ARRAY['2026-11-29 21:30:00+05:30'::timestamptz, 'infinity', '0044-03-15 12:00:00+00 BC'],
                ARRAY['2026-11-29'::date, '0044-03-15 BC', '-infinity'],
                ARRAY['0b3a4a0e-6c1f-4b0e-9a3e-1c2d3e4f5a6b'::uuid],
                ARRAY['((1,1),(0,0))'::box, '((2,2),(1,1))'::box],
                '[-1:0][1:2]={{1,-2},{9223372036854775807,NULL}}', ARRAY['[1,5)'::int4range, 'empty'],
                42, '{1,2}', 'happy', '{happy,sad,NULL}', ROW(1.5, 2), ARRAY[ROW(1.5, 2)::complex, ROW(NULL, -1)::complex],
                NULL
            )""";

    /** The JSON of every column, exactly; "money" depends on lc_monetary (pinned to C above). */
    private static final Map<String, String> EXPECTED = new LinkedHashMap<>();

    static {
        EXPECTED.put("id", "9223372036854775807");
        EXPECTED.put("i2", "-32768");
        EXPECTED.put("i4", "2147483647");
        EXPECTED.put("o", "4294967295");
        EXPECTED.put("f4", "3.14");
        EXPECTED.put("f8", "0.1");
        EXPECTED.put("f8_nan", "\"NaN\"");
        EXPECTED.put("f8_inf", "\"Infinity\"");
        EXPECTED.put("f4_ninf", "\"-Infinity\"");
        EXPECTED.put("f8_negzero", "-0.0");
        EXPECTED.put("f8_exp", "1.5e+300");
        EXPECTED.put("n", "12.50");
        EXPECTED.put("n_big", "123456789012345678901234567890.123456789012345678901234");
        EXPECTED.put("n_small", "0.0000000001");
        EXPECTED.put("n_nan", "\"NaN\"");
        EXPECTED.put("n_inf", "\"Infinity\"");
        EXPECTED.put("n_ninf", "\"-Infinity\"");
        EXPECTED.put("b", "true");
        EXPECTED.put("b_false", "false");
        EXPECTED.put("j", "{\"a\": [1, \"x\\\"y\"], \"u\": \"ü\", \"n\": null}");
        EXPECTED.put("jb", "{\"nested\": {\"deep\": [1.50, true, {\"k\": \"v\"}]}}");
        EXPECTED.put("jb_null", "null");
        EXPECTED.put("by", "\"AP+Aw/4=\"");
        EXPECTED.put("by_empty", "\"\"");
        EXPECTED.put("tz", "\"2026-11-29T16:00:00.123456Z\"");
        EXPECTED.put("tz_bc", "\"-0043-03-15T12:00:00Z\"");
        EXPECTED.put("tz_inf", "\"infinity\"");
        EXPECTED.put("tz_ninf", "\"-infinity\"");
        EXPECTED.put("tz_old", "\"1900-01-01T00:00:00Z\"");
        EXPECTED.put("ts", "\"2026-11-29T16:00:00.123456\"");
        EXPECTED.put("ts_bc", "\"-0001-06-30T12:34:56.7\"");
        EXPECTED.put("ts_ninf", "\"-infinity\"");
        EXPECTED.put("d", "\"2026-11-29\"");
        EXPECTED.put("d_bc", "\"-0043-03-15\"");
        EXPECTED.put("d_inf", "\"infinity\"");
        EXPECTED.put("t", "\"16:00:00.123456\"");
        EXPECTED.put("ttz", "\"16:00:00+05:30\"");
        EXPECTED.put("u", "\"0b3a4a0e-6c1f-4b0e-9a3e-1c2d3e4f5a6b\"");
        EXPECTED.put("tx", "\"ünï 😀 中文 \\\"q\\\" \\\\ \\t\\n\\u0001 \u2028 end\"");
        EXPECTED.put("tx_empty", "\"\"");
        EXPECTED.put("vc", "\"abc\"");
        EXPECTED.put("bp", "\"ab   \"");
        EXPECTED.put("nm", "\"a_name\"");
        EXPECTED.put("ch", "\"x\"");
        EXPECTED.put("iv", "\"1 day 02:03:04.5\"");
        EXPECTED.put("m", "\"$12.50\"");
        EXPECTED.put("x", "\"<a b=\\\"c\\\">d</a>\"");
        EXPECTED.put("ip", "\"192.168.0.1/24\"");
        EXPECTED.put("cd", "\"10.0.0.0/8\"");
        EXPECTED.put("mac", "\"08:00:2b:01:02:03\"");
        EXPECTED.put("r", "\"[1,5)\"");
        EXPECTED.put("nr", "\"(1.5,2.5]\"");
        EXPECTED.put("bx", "\"(2,2),(1,1)\"");
        EXPECTED.put("ai", "[1,null,3]");
        EXPECTED.put("ai2", "[[1,2],[3,4]]");
        EXPECTED.put("a_bounds", "[1,2]");
        EXPECTED.put("a_empty", "[]");
        EXPECTED.put("a_text", "[\"NULL\",null,\"\",\"a b\",\"q\\\"b\\\\s\",\"x,y\",\"{}\",\"ünï\",\"tab\\there\",\"😀\"]");
        EXPECTED.put("a_num", "[1.50,\"NaN\",\"Infinity\",\"-Infinity\",null]");
        EXPECTED.put("a_f8", "[-0.0,\"NaN\",1.5,\"-Infinity\"]");
        EXPECTED.put("a_bool", "[true,false,null]");
        EXPECTED.put("a_jb", "[{\"a\": [1, \"x\\\"y\"]},null,null,[]]");
        EXPECTED.put("a_by", "[\"AP8=\",null,\"\"]");
        EXPECTED.put("a_tz", "[\"2026-11-29T16:00:00Z\",\"infinity\",\"-0043-03-15T12:00:00Z\"]");
        EXPECTED.put("a_d", "[\"2026-11-29\",\"-0043-03-15\",\"-infinity\"]");
        EXPECTED.put("a_uuid", "[\"0b3a4a0e-6c1f-4b0e-9a3e-1c2d3e4f5a6b\"]");
        EXPECTED.put("a_box", "[\"(1,1),(0,0)\",\"(2,2),(1,1)\"]");
        EXPECTED.put("a_i8", "[[1,-2],[9223372036854775807,null]]");
        EXPECTED.put("a_range", "[\"[1,5)\",\"empty\"]");
        EXPECTED.put("dom", "42");
        EXPECTED.put("dom_arr", "[1,2]");
        EXPECTED.put("e", "\"happy\"");
        EXPECTED.put("e_arr", "[\"happy\",\"sad\",null]");
        EXPECTED.put("comp", "\"(1.5,2)\"");
        EXPECTED.put("comp_arr", "[\"(1.5,2)\",\"(,-1)\"]");
        EXPECTED.put("nothing", "null");
    }

    private PostgresServer server;
    private String database;

    @BeforeAll
    void insertOneRowOfEveryType() throws SQLException {
        server = TestPostgres.shared();
        database = server.createDatabase("values");
        try (Connection c = server.connect(database); Statement s = c.createStatement()) {
            s.execute("ALTER DATABASE " + database + " SET timezone = 'Asia/Kolkata'");
        }
        try (Connection c = server.connect(database); Statement s = c.createStatement()) {
            // pgjdbc sends the JVM's zone at start-up, which outranks the database's: set it again
            s.execute("SET TimeZone = 'Asia/Kolkata'");
            s.execute("CREATE DOMAIN posint AS int4 CHECK (VALUE > 0)");
            s.execute("CREATE DOMAIN intlist AS int4[]");
            s.execute("CREATE TYPE mood AS ENUM ('happy', 'sad')");
            s.execute("CREATE TYPE complex AS (r float8, i float8)");
            s.execute(TABLE);
            s.execute("CREATE PUBLICATION pub FOR TABLE every_type");
            s.execute("SELECT pg_create_logical_replication_slot('values_slot', 'pgoutput')");
            s.execute(INSERT);
        }
    }

    @Test
    void everyTypeIsWrittenAsTheContractSays() throws Exception {
        Change change = peek("UTC");
        assertThat(change.columns()).isEqualTo(EXPECTED);

        // the whole row is one valid JSON object whose values read back as what was stored
        ObjectMapper mapper = new ObjectMapper().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
                .configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false);
        JsonNode row = mapper.readTree(change.row());
        assertThat(row.size()).isEqualTo(EXPECTED.size());
        assertThat(row.get("id").longValue()).isEqualTo(Long.MAX_VALUE);
        assertThat(row.get("o").longValue()).isEqualTo(4294967295L);
        assertThat(row.get("n").decimalValue()).isEqualByComparingTo("12.50");
        assertThat(row.get("n").decimalValue().scale()).isEqualTo(2);
        assertThat(row.get("n_big").decimalValue().toPlainString())
                .isEqualTo("123456789012345678901234567890.123456789012345678901234");
        assertThat(new ObjectMapper().readTree(change.row()).get("f8_negzero").doubleValue())
                .isEqualTo(-0.0).matches(v -> 1 / v < 0, "negative zero");
        assertThat(row.get("j").get("a").get(1).textValue()).isEqualTo("x\"y");
        assertThat(row.get("jb").get("nested").get("deep").get(0).decimalValue()).isEqualByComparingTo("1.50");
        assertThat(Base64.getDecoder().decode(row.get("by").textValue()))
                .containsExactly(0x00, 0xff, 0x80, 0xc3, 0xfe);
        assertThat(Instant.parse(row.get("tz").textValue())).isEqualTo(Instant.parse("2026-11-29T16:00:00.123456Z"));
        assertThat(row.get("tx").textValue()).isEqualTo("ünï 😀 中文 \"q\" \\ \t\n\u0001 \u2028 end");
        assertThat(row.get("a_text").get(4).textValue()).isEqualTo("q\"b\\s");
        assertThat(row.get("nothing").isNull()).isTrue();
    }

    @Test
    void domainsAndUserTypesAreDescribedByTypeMessages() throws Exception {
        Change change = peek("UTC");
        Map<String, PgOutputMessage.Type> byColumn = new HashMap<>();
        for (PgOutputMessage.Relation.Column column : change.relation().columns()) {
            PgOutputMessage.Type type = change.types().get(column.typeOid());
            if (type != null) {
                byColumn.put(column.name(), type);
            }
        }
        assertThat(byColumn.keySet()).containsExactlyInAnyOrder("dom", "dom_arr", "e", "e_arr", "comp", "comp_arr");
        // a domain: its own OID, the base type's namespace ("" for pg_catalog) and name
        assertThat(byColumn.get("dom").namespace()).isEmpty();
        assertThat(byColumn.get("dom").typeName()).isEqualTo("int4");
        assertThat(byColumn.get("dom_arr").namespace()).isEmpty();
        assertThat(byColumn.get("dom_arr").typeName()).isEqualTo("_int4");
        assertThat(byColumn.get("e").namespace()).isEqualTo("public");
        assertThat(byColumn.get("e").typeName()).isEqualTo("mood");
        assertThat(byColumn.get("e_arr").typeName()).isEqualTo("_mood");
        assertThat(byColumn.get("comp").typeName()).isEqualTo("complex");
        assertThat(byColumn.get("comp_arr").typeName()).isEqualTo("_complex");
    }

    @Test
    void timestamptzIsUtcWhateverZoneTheServerPrintsIn() throws Exception {
        Change kolkata = peek("Asia/Kolkata");
        assertThat(kolkata.text("tz")).isEqualTo("2026-11-29 21:30:00.123456+05:30");
        assertThat(kolkata.text("tz_bc")).isEqualTo("0044-03-15 17:53:28+05:53:28 BC");
        assertThat(kolkata.columns()).isEqualTo(EXPECTED);

        Change stJohns = peek("America/St_Johns");
        assertThat(stJohns.text("tz")).isEqualTo("2026-11-29 12:30:00.123456-03:30");
        assertThat(stJohns.columns()).isEqualTo(EXPECTED);
    }

    /** What one reading of the slot gives: the messages, and the JSON of the row column by column and whole. */
    private record Change(PgOutputMessage.Relation relation, Map<Long, PgOutputMessage.Type> types, TupleData tuple,
            Map<String, String> columns, String row) {

        String text(String column) {
            for (int i = 0; i < relation.columns().size(); i++) {
                if (relation.columns().get(i).name().equals(column)) {
                    return tuple.text(i);
                }
            }
            throw new AssertionError("no column " + column);
        }
    }

    private Change peek(String timeZone) throws SQLException, IOException {
        List<PgOutputMessage> messages = new ArrayList<>();
        try (Connection c = server.connect(database); Statement s = c.createStatement()) {
            for (String setting : WALHOOK_SETTINGS) {
                s.execute(setting);
            }
            s.execute("SET TimeZone = '" + timeZone + "'");
            PgOutputDecoder decoder = new PgOutputDecoder();
            try (ResultSet rs = s.executeQuery("SELECT data FROM pg_logical_slot_peek_binary_changes('values_slot',"
                    + " NULL, NULL, 'proto_version', '1', 'publication_names', 'pub')")) {
                while (rs.next()) {
                    messages.add(decoder.decode(ByteBuffer.wrap(rs.getBytes(1))));
                }
            }
        }
        Map<Long, PgOutputMessage.Type> types = new HashMap<>();
        PgOutputMessage.Relation relation = null;
        TupleData tuple = null;
        for (PgOutputMessage message : messages) {
            if (message instanceof PgOutputMessage.Type type) {
                types.put(type.typeOid(), type);
            } else if (message instanceof PgOutputMessage.Relation r) {
                relation = r;
            } else if (message instanceof PgOutputMessage.Insert insert) {
                tuple = insert.newTuple();
            }
        }
        assertThat(relation).as("Relation message").isNotNull();
        assertThat(tuple).as("Insert message").isNotNull();

        List<ValueConverter> converters = new ValueConverters().forRelation(relation, types::get);
        Map<String, String> columns = new LinkedHashMap<>();
        JsonWriter whole = new JsonWriter();
        whole.startObject();
        for (int i = 0; i < converters.size(); i++) {
            String name = relation.columns().get(i).name();
            JsonWriter single = new JsonWriter();
            write(converters.get(i), single, tuple, i);
            columns.put(name, single.toString());
            write(converters.get(i), whole.name(name), tuple, i);
        }
        whole.endObject();
        return new Change(relation, types, tuple, columns, whole.toString());
    }

    /** What the event writer does around a converter: NULL is the caller's. */
    private static void write(ValueConverter converter, JsonWriter json, TupleData tuple, int i) {
        if (tuple.isNull(i)) {
            json.nullValue();
        } else {
            converter.write(json, tuple, i);
        }
    }
}
